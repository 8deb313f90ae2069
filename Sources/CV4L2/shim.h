#ifndef CV4L2_SHIM_H
#define CV4L2_SHIM_H
#include <fcntl.h>
#include <linux/videodev2.h>
#include <libv4l2.h>

// v4l2_open and v4l2_ioctl are variadic: Swift cannot call them directly.
static inline int CV4L2_open(const char *path, int flags) { return v4l2_open(path, flags); }
static inline int CV4L2_ioctl(int fd, unsigned long request, void *arg) { return v4l2_ioctl(fd, request, arg); }
static inline int CV4L2_close(int fd) { return v4l2_close(fd); }
#endif
