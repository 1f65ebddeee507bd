// KeepFreedMemoryInHeap: the allocator policy of pipetrain's processes, set first thing in main.
//
// Why: the workers allocate and drop activation buffers and messages every step, and the
// coordinator and the CLI build and drop plans of hundreds of thousands of actions (p = 64,
// m = 1024: vectors of megabytes). By default glibc serves such blocks with fresh mmaps and
// gives freed heap tops back to the kernel, so every one of them is page-faulted in again
// (a V schedule's generation at that size spent about 7% of its time in those faults). Kept in
// the heap, freed pages are reused; a process then holds its peak heap, which these do anyway.
//
// Process-wide (mallopt), so only mains call it; benchmarks that time what a main does call it
// too, so that they time it under the same policy.
#ifndef PIPETRAIN_COMMON_HEAP_POLICY_H_
#define PIPETRAIN_COMMON_HEAP_POLICY_H_

#include <malloc.h>

namespace pipetrain {

inline void KeepFreedMemoryInHeap() {
  mallopt(M_MMAP_MAX, 0);               // no block of its own mmap, however large
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // freed heap tops stay (up to 1 GiB)
}

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_HEAP_POLICY_H_
