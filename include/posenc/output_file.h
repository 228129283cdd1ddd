// Writing an output file whole or not at all, and what an output path may be.
// Every file posenc writes (GgufWriter, the posenc command's reports,
// pictures, grid cells and checkpoints, Python's write_gguf) goes through
// OutputFile, so one policy decides what a path given as an output is:
//
//   a new name          created (its directory must exist);
//   a regular file      replaced atomically: the bytes go to a temporary file
//                       beside it, flushed to disk, then renamed onto it, so
//                       a failure or a kill never leaves a half-written file;
//   a symlink           its target is written, by the rules here (the
//                       temporary beside the target, so the link stays);
//   a character device  written through, never renamed over (/dev/null
//                       stays /dev/null; /dev/full is an error, ENOSPC);
//   anything else       refused: a directory, a FIFO (opening it would
//                       block), a socket, a block device.
//
// Each check is a posenc::Error "[op] parameter = "path": rule" naming the
// path. The temporary is ".NAME.HOST-PID-N.tmp"; a process killed while
// writing leaves it behind, and the next write of NAME removes every such
// temporary of NAME whose writer (HOST, PID) is no longer running.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace posenc {

class OutputFile {
 public:
  // Checks `path` (see above), removes stale temporaries of it, and creates
  // the temporary (or opens the device). `op` and `parameter` name it in
  // errors: OutputFile("train", "--out", path).
  OutputFile(std::string_view op, std::string_view parameter, const std::string& path);
  ~OutputFile();  // removes the temporary unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Appends bytes; a full disk or /dev/full is an Error naming the path.
  void Write(const void* data, std::size_t size);
  void Write(std::string_view bytes) { Write(bytes.data(), bytes.size()); }
  // Flushes the bytes to disk and closes the file: after Sync, Commit
  // only renames, so a set of files can be made visible together (all
  // synced, then all committed).
  void Sync();
  // Sync, then the temporary replaces the target.
  void Commit();

  // The file that will be written: the path given, with symlinks followed.
  const std::string& target() const { return target_; }

 private:
  [[noreturn]] void Fail(std::string_view rule, int error) const;

  std::string op_, parameter_, path_;
  std::string target_;
  std::string temporary_;  // empty when writing through a device, or once committed
  int fd_ = -1;
};

// Throws unless `path` can be written as an output: the checks OutputFile
// makes, its temporary created and removed again. Commands call it before
// their work, so that a bad --out is refused at once, not after an hour.
void RequireWritableOutput(std::string_view op, std::string_view parameter, const std::string& path);

}  // namespace posenc
