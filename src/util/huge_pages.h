// Transparent huge pages for the large buffers that a decode step streams
// whole (the stored weights, the kept keys and values).
#pragma once

#include <cstddef>

namespace posenc {

// Asks Linux for transparent huge pages (2 MiB) over the whole 2 MiB pages
// inside [data, data + bytes), a buffer not yet touched. With 4 KiB pages
// every page of a stream is a TLB miss, and the hardware prefetchers stop at
// each page's end. SmolLM2's int8 decode on a 2-core Zen 3, two models in
// one process, with and without, alternating rounds: 1.07-1.08x after 0
// cached tokens (the output matrix, 28 MB, is the one weight buffer of over
// 2 MiB), 1.06x after 2,048; decode attention alone over 8,192 cached
// tokens, 1.07x. A hint only: where THP is off ("never"), or off Linux, nothing
// changes.
void AdviseHugePages(void* data, std::size_t bytes);

}  // namespace posenc
