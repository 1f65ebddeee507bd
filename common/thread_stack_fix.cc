// Raises tiny thread stacks requested by libraries. Debian's civetweb (inside prometheus-cpp's
// pull Exposer) creates threads with a fixed 100 KiB stack, and glibc carves every loaded
// library's static TLS out of each thread's stack: OpenBLAS (60 KiB) plus glog (30 KiB) leave
// too little and the Exposer crashes. Linked as an OBJECT library into every executable that
// starts an Exposer (an archive member would never be pulled in: nothing references it).
#include <dlfcn.h>
#include <pthread.h>

#include <cstddef>

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  using Fn = int (*)(pthread_attr_t*, size_t);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  constexpr size_t kMin = 1 << 20;  // 1 MiB of address space; only touched pages cost memory
  return real(attr, size < kMin ? kMin : size);
}
