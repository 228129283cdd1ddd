"""The analyses behind the gallery, as NumPy arrays."""
import posenc

spec = posenc.RopeSpec.from_hf_config("examples/configs/llama-2-7b.json")
d = posenc.analysis.rope_dims(spec, 8192, comparison_factor=8)   # per pair: inv_freq, wavelength, rotations
decay = posenc.analysis.rope_decay(spec, distances=posenc.analysis.log_spaced_distances(65536, 400))
T = posenc.analysis.sinusoidal_shift_matrix(128, delta=5)         # p_{k+5} = T @ p_k
T_found = posenc.analysis.sinusoidal_solve_shift_matrix(128, delta=5, first=1000, count=256)  # from the encodings alone
