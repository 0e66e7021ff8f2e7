/*
 * A slower disk for benchmarks, without root: loaded with LD_PRELOAD into a service, it adds
 * SLOW_SYNC_US microseconds after every fsync, fdatasync and write to a file opened O_DSYNC/O_SYNC.
 * Only for test/bench (slow-disk.js builds it with the machine's C compiler); the tests never load it.
 * It models a disk whose flushes take longer and overlap perfectly; a real device may overlap less.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long delay_us(void) {
  static long d = -1;
  if (d < 0) { const char *s = getenv("SLOW_SYNC_US"); d = s ? atol(s) : 0; }
  return d;
}
static void nap(void) {
  long d = delay_us();
  if (d > 0) { struct timespec t = { d / 1000000, (d % 1000000) * 1000 }; nanosleep(&t, 0); }
}
static int synced(int fd) { int f = fcntl(fd, F_GETFL); return f >= 0 && (f & O_DSYNC); }

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name)
int fsync(int fd) { REAL(fsync); int r = real_fsync(fd); nap(); return r; }
int fdatasync(int fd) { REAL(fdatasync); int r = real_fdatasync(fd); nap(); return r; }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) { REAL(pwrite); ssize_t r = real_pwrite(fd, b, n, o); if (synced(fd)) nap(); return r; }
ssize_t pwrite64(int fd, const void *b, size_t n, off_t o) { REAL(pwrite64); ssize_t r = real_pwrite64(fd, b, n, o); if (synced(fd)) nap(); return r; }
ssize_t pwritev(int fd, const struct iovec *v, int c, off_t o) { REAL(pwritev); ssize_t r = real_pwritev(fd, v, c, o); if (synced(fd)) nap(); return r; }
ssize_t pwritev64(int fd, const struct iovec *v, int c, off_t o) { REAL(pwritev64); ssize_t r = real_pwritev64(fd, v, c, o); if (synced(fd)) nap(); return r; }
ssize_t write(int fd, const void *b, size_t n) { REAL(write); ssize_t r = real_write(fd, b, n); if (delay_us() > 0 && synced(fd)) nap(); return r; }
ssize_t writev(int fd, const struct iovec *v, int c) { REAL(writev); ssize_t r = real_writev(fd, v, c); if (delay_us() > 0 && synced(fd)) nap(); return r; }
