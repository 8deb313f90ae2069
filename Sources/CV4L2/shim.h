#ifndef CV4L2_SHIM_H
#define CV4L2_SHIM_H
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/videodev2.h>
#include <libv4l2.h>

// What Swift cannot reach on its own: libv4l2's variadic calls, the ioctl request codes
// (_IOWR macros), the pixel format codes (v4l2_fourcc macros) and MAP_FAILED.
// Everything goes through libv4l2 (v4l2_open/v4l2_ioctl/v4l2_mmap), so that its format
// conversion (MJPEG and others to YUV420, marked V4L2_FMT_FLAG_EMULATED) works.

// libv4l2 prints a line on stderr for every failing call ("libv4l2: error dequeuing buf:
// ..."), which would break the agent's log lines. Vigil reports every failure itself, with
// what to do: the library's lines go to /dev/null (v4l2_log_file), once per process.
static pthread_once_t CV4L2_quietOnce = PTHREAD_ONCE_INIT;
static void CV4L2_quiet(void) {
    FILE *sink = fopen("/dev/null", "w");
    if (sink != NULL) v4l2_log_file = sink; // else libv4l2 keeps printing to stderr
}
static inline void CV4L2_silenceLibraryMessages(void) { (void)pthread_once(&CV4L2_quietOnce, CV4L2_quiet); }

// v4l2_open and v4l2_ioctl are variadic.
static inline int CV4L2_open(const char *path, int flags) { return v4l2_open(path, flags); }
static inline int CV4L2_ioctl(int fd, unsigned long request, void *arg) { return v4l2_ioctl(fd, request, arg); }
static inline int CV4L2_close(int fd) { return v4l2_close(fd); }

// A shared, readable and writable mapping of a capture buffer; NULL when mmap failed
// (errno says why), so Swift never compares against MAP_FAILED.
static inline void *CV4L2_mmap(size_t length, int fd, int64_t offset) {
    void *p = v4l2_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    return p == MAP_FAILED ? NULL : p;
}
static inline int CV4L2_munmap(void *start, size_t length) { return v4l2_munmap(start, length); }

// Request codes.
static const unsigned long CV4L2_VIDIOC_QUERYCAP = VIDIOC_QUERYCAP;
static const unsigned long CV4L2_VIDIOC_ENUM_FMT = VIDIOC_ENUM_FMT;
static const unsigned long CV4L2_VIDIOC_ENUM_FRAMESIZES = VIDIOC_ENUM_FRAMESIZES;
static const unsigned long CV4L2_VIDIOC_ENUM_FRAMEINTERVALS = VIDIOC_ENUM_FRAMEINTERVALS;
static const unsigned long CV4L2_VIDIOC_G_FMT = VIDIOC_G_FMT;
static const unsigned long CV4L2_VIDIOC_S_FMT = VIDIOC_S_FMT;
static const unsigned long CV4L2_VIDIOC_G_PARM = VIDIOC_G_PARM;
static const unsigned long CV4L2_VIDIOC_S_PARM = VIDIOC_S_PARM;
static const unsigned long CV4L2_VIDIOC_CROPCAP = VIDIOC_CROPCAP;
static const unsigned long CV4L2_VIDIOC_REQBUFS = VIDIOC_REQBUFS;
static const unsigned long CV4L2_VIDIOC_QUERYBUF = VIDIOC_QUERYBUF;
static const unsigned long CV4L2_VIDIOC_QBUF = VIDIOC_QBUF;
static const unsigned long CV4L2_VIDIOC_DQBUF = VIDIOC_DQBUF;
static const unsigned long CV4L2_VIDIOC_STREAMON = VIDIOC_STREAMON;
static const unsigned long CV4L2_VIDIOC_STREAMOFF = VIDIOC_STREAMOFF;
static const unsigned long CV4L2_VIDIOC_G_INPUT = VIDIOC_G_INPUT;
static const unsigned long CV4L2_VIDIOC_ENUMINPUT = VIDIOC_ENUMINPUT;
static const unsigned long CV4L2_VIDIOC_QUERYCTRL = VIDIOC_QUERYCTRL;
static const unsigned long CV4L2_VIDIOC_G_CTRL = VIDIOC_G_CTRL;
static const unsigned long CV4L2_VIDIOC_S_CTRL = VIDIOC_S_CTRL;

// Pixel formats Vigil takes, and the compressed ones libv4l2 converts from.
static const uint32_t CV4L2_PIX_FMT_NV12 = V4L2_PIX_FMT_NV12;
static const uint32_t CV4L2_PIX_FMT_YUV420 = V4L2_PIX_FMT_YUV420;
static const uint32_t CV4L2_PIX_FMT_YUYV = V4L2_PIX_FMT_YUYV;
static const uint32_t CV4L2_PIX_FMT_YUV422P = V4L2_PIX_FMT_YUV422P;
static const uint32_t CV4L2_PIX_FMT_MJPEG = V4L2_PIX_FMT_MJPEG;
static const uint32_t CV4L2_PIX_FMT_JPEG = V4L2_PIX_FMT_JPEG;

// Query control flag: ask for the next control after the given id.
static const uint32_t CV4L2_CTRL_FLAG_NEXT_CTRL = V4L2_CTRL_FLAG_NEXT_CTRL;

// Memory-to-memory encoders (H264's V4L2 backend). These go straight to the kernel with
// ioctl(2), not through libv4l2, whose conversions are for cameras.
static inline int CV4L2_rawIoctl(int fd, unsigned long request, void *arg) { return ioctl(fd, request, arg); }
static inline void *CV4L2_rawMmap(size_t length, int fd, int64_t offset) {
    void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    return p == MAP_FAILED ? NULL : p;
}
static const unsigned long CV4L2_VIDIOC_ENCODER_CMD = VIDIOC_ENCODER_CMD;
static const unsigned long CV4L2_VIDIOC_S_SELECTION = VIDIOC_S_SELECTION;
static const uint32_t CV4L2_SEL_TGT_CROP = V4L2_SEL_TGT_CROP;
static const uint32_t CV4L2_ENC_CMD_STOP = V4L2_ENC_CMD_STOP;
static const uint32_t CV4L2_BUF_FLAG_KEYFRAME = V4L2_BUF_FLAG_KEYFRAME;
static const uint32_t CV4L2_BUF_FLAG_LAST = V4L2_BUF_FLAG_LAST;
static const uint32_t CV4L2_BUF_FLAG_ERROR = V4L2_BUF_FLAG_ERROR;
static const uint32_t CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME = V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME;
static const uint32_t CV4L2_CID_MPEG_VIDEO_H264_I_PERIOD = V4L2_CID_MPEG_VIDEO_H264_I_PERIOD;
static const uint32_t CV4L2_CID_MPEG_VIDEO_GOP_SIZE = V4L2_CID_MPEG_VIDEO_GOP_SIZE;
static const uint32_t CV4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER = V4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER;
static const uint32_t CV4L2_CID_MPEG_VIDEO_BITRATE = V4L2_CID_MPEG_VIDEO_BITRATE;
static const uint32_t CV4L2_CID_MPEG_VIDEO_BITRATE_MODE = V4L2_CID_MPEG_VIDEO_BITRATE_MODE;
static const uint32_t CV4L2_CID_MPEG_VIDEO_H264_PROFILE = V4L2_CID_MPEG_VIDEO_H264_PROFILE;
static const uint32_t CV4L2_CID_MPEG_VIDEO_H264_LEVEL = V4L2_CID_MPEG_VIDEO_H264_LEVEL;
#endif
