"""Run-time plumbing: kernel sources, the compile cache, array and stream interop."""
