// A stand-in for the vigil-libcamera plugin, for unit tests of LibcameraSource: the same C
// table (Sources/CLibcameraPlugin/vigil_libcamera.h), one camera of NV12 frames in memfd
// buffers, driven by the id it is opened with:
//   "one-buffer"    each buffer's two planes in one memfd (what the Pi's ISP gives)
//   "split-planes"  each plane in a memfd of its own (vigil must copy)
//   "gone-after-N"  as one-buffer, then ENODEV after N frames (the camera was unplugged)
// Every frame's luma bytes are its sequence number (mod 256); its sensor timestamp is
// CLOCK_BOOTTIME when it is dequeued, as libcamera documents SensorTimestamp.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../../Sources/CLibcameraPlugin/vigil_libcamera.h"

struct vigil_lc_camera {
    char id[64];
    int split;
    int gone_after;
    uint32_t width, height, count;
    int fds[VIGIL_LC_MAX_BUFFERS][2];
    uint8_t *maps[VIGIL_LC_MAX_BUFFERS][2];
    size_t lengths[VIGIL_LC_MAX_BUFFERS][2];
    pthread_mutex_t lock;
    pthread_cond_t ready;
    uint32_t queue[VIGIL_LC_MAX_BUFFERS];
    uint32_t queued;
    uint32_t sequence;
    int running;
    int64_t duration;  // ns between frames (FrameDurationLimits, else 10 ms)
    int64_t due;       // CLOCK_MONOTONIC time of the next frame
};

static void fail(vigil_lc_error *error, int code, const char *message) {
    if (!error) return;
    error->code = code;
    snprintf(error->message, sizeof(error->message), "%s", message);
}

static int32_t list(vigil_lc_camera_info *cameras, uint32_t capacity, uint32_t *count, vigil_lc_error *error) {
    (void)error;
    *count = 1;
    if (capacity < 1) return 0;
    memset(&cameras[0], 0, sizeof(cameras[0]));
    snprintf(cameras[0].id, sizeof(cameras[0].id), "one-buffer");
    snprintf(cameras[0].model, sizeof(cameras[0].model), "fake");
    cameras[0].location = 2;
    cameras[0].has_frame_rate = 1;
    cameras[0].format_count = 1;
    vigil_lc_format *format = &cameras[0].formats[0];
    snprintf(format->name, sizeof(format->name), "NV12");
    format->minimum = (vigil_lc_size){64, 64};
    format->maximum = (vigil_lc_size){1920, 1080};
    format->size_count = 2;
    format->sizes[0] = (vigil_lc_size){640, 480};
    format->sizes[1] = (vigil_lc_size){1280, 720};
    return 0;
}

static vigil_lc_camera *open_camera(const char *id, vigil_lc_error *error) {
    if (!id || !*id) id = "one-buffer";
    int split = strcmp(id, "split-planes") == 0;
    int gone_after = 0;
    if (!split && strcmp(id, "one-buffer") != 0 && sscanf(id, "gone-after-%d", &gone_after) != 1) {
        fail(error, ENOENT, "the fake has no such camera");
        return NULL;
    }
    vigil_lc_camera *camera = calloc(1, sizeof(*camera));
    snprintf(camera->id, sizeof(camera->id), "%s", id);
    camera->split = split;
    camera->gone_after = gone_after;
    pthread_mutex_init(&camera->lock, NULL);
    pthread_cond_init(&camera->ready, NULL);
    return camera;
}

static const char *camera_id(vigil_lc_camera *camera) { return camera->id; }

static int memfd(size_t length) {
    int fd = memfd_create("fake-libcamera", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)length) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int32_t configure(vigil_lc_camera *camera, uint32_t width, uint32_t height, uint32_t buffers,
                         vigil_lc_stream *stream, vigil_lc_error *error) {
    memset(stream, 0, sizeof(*stream));
    camera->width = width;
    camera->height = height;
    camera->count = buffers < 2 ? 2 : buffers > VIGIL_LC_MAX_BUFFERS ? VIGIL_LC_MAX_BUFFERS : buffers;
    size_t luma = (size_t)width * height, chroma = luma / 2;
    for (uint32_t i = 0; i < camera->count; i++) {
        vigil_lc_buffer *buffer = &stream->buffers[i];
        buffer->plane_count = 2;
        if (camera->split) {
            camera->lengths[i][0] = luma;
            camera->lengths[i][1] = chroma;
            camera->fds[i][0] = memfd(luma);
            camera->fds[i][1] = memfd(chroma);
            buffer->planes[0] = (vigil_lc_plane){camera->fds[i][0], 0, (uint32_t)luma};
            buffer->planes[1] = (vigil_lc_plane){camera->fds[i][1], 0, (uint32_t)chroma};
        } else {
            camera->lengths[i][0] = luma + chroma;
            camera->fds[i][0] = memfd(luma + chroma);
            camera->fds[i][1] = -1;
            buffer->planes[0] = (vigil_lc_plane){camera->fds[i][0], 0, (uint32_t)luma};
            buffer->planes[1] = (vigil_lc_plane){camera->fds[i][0], (uint32_t)luma, (uint32_t)chroma};
        }
        for (int p = 0; p < 2; p++) {
            if (camera->split || p == 0) {
                if (camera->fds[i][p] < 0) {
                    fail(error, ENOMEM, "memfd_create failed");
                    return -1;
                }
                camera->maps[i][p] = mmap(NULL, camera->lengths[i][p], PROT_READ | PROT_WRITE, MAP_SHARED,
                                          camera->fds[i][p], 0);
            }
        }
    }
    snprintf(stream->format_name, sizeof(stream->format_name), "NV12");
    stream->width = width;
    stream->height = height;
    stream->stride = width;
    stream->frame_size = (uint32_t)(luma + chroma);
    stream->buffer_count = camera->count;
    return 0;
}

static int64_t now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int32_t start(vigil_lc_camera *camera, int64_t duration, vigil_lc_started *started, vigil_lc_error *error) {
    (void)error;
    started->frame_duration_ns = duration;
    camera->duration = duration > 0 ? duration : 10000000;
    camera->due = now(CLOCK_MONOTONIC);
    started->autofocus = 0;
    pthread_mutex_lock(&camera->lock);
    for (uint32_t i = 0; i < camera->count; i++) camera->queue[i] = i;
    camera->queued = camera->count;
    camera->running = 1;
    pthread_mutex_unlock(&camera->lock);
    return 0;
}

static int32_t dequeue(vigil_lc_camera *camera, int32_t timeout_ms, vigil_lc_frame *frame, vigil_lc_error *error) {
    pthread_mutex_lock(&camera->lock);
    if (camera->gone_after && camera->sequence >= (uint32_t)camera->gone_after) {
        pthread_mutex_unlock(&camera->lock);
        fail(error, ENODEV, "the fake camera was unplugged");
        return -1;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    while (camera->queued == 0) {
        if (pthread_cond_timedwait(&camera->ready, &camera->lock, &deadline) != 0) break;
    }
    if (camera->queued == 0) {
        pthread_mutex_unlock(&camera->lock);
        return 0;
    }
    uint32_t index = camera->queue[0];
    memmove(camera->queue, camera->queue + 1, --camera->queued * sizeof(uint32_t));
    uint32_t sequence = camera->sequence++;
    int64_t due = camera->due;
    camera->due += camera->duration;
    pthread_mutex_unlock(&camera->lock);
    // A frame every frame duration of the camera's clock.
    struct timespec at = {(time_t)(due / 1000000000), (long)(due % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {
    }
    memset(camera->maps[index][0], (int)(sequence & 0xff), (size_t)camera->width * camera->height);
    memset(frame, 0, sizeof(*frame));
    frame->buffer = index;
    frame->status = VIGIL_LC_FRAME_OK;
    frame->sequence = sequence;
    frame->has_sensor_timestamp = 1;
    frame->sensor_timestamp_ns = now(CLOCK_BOOTTIME);
    return 1;
}

static int32_t requeue(vigil_lc_camera *camera, uint32_t index, vigil_lc_error *error) {
    pthread_mutex_lock(&camera->lock);
    if (index >= camera->count || camera->queued >= camera->count) {
        pthread_mutex_unlock(&camera->lock);
        fail(error, EINVAL, "the fake got back a buffer it did not hand out");
        return -1;
    }
    if (camera->running) {
        camera->queue[camera->queued++] = index;
        pthread_cond_signal(&camera->ready);
    }
    pthread_mutex_unlock(&camera->lock);
    return 0;
}

static void stop(vigil_lc_camera *camera) {
    pthread_mutex_lock(&camera->lock);
    camera->running = 0;
    pthread_mutex_unlock(&camera->lock);
}

static void close_camera(vigil_lc_camera *camera) {
    stop(camera);
    for (uint32_t i = 0; i < camera->count; i++) {
        for (int p = 0; p < 2; p++) {
            if (camera->maps[i][p]) munmap(camera->maps[i][p], camera->lengths[i][p]);
            if (camera->fds[i][p] >= 0 && (p == 0 || camera->split)) close(camera->fds[i][p]);
        }
    }
    free(camera);
}

__attribute__((visibility("default"))) const vigil_lc_plugin *vigil_libcamera_plugin(void) {
    static const vigil_lc_plugin table = {
        VIGIL_LIBCAMERA_ABI, sizeof(vigil_lc_plugin), "fake", list, open_camera, camera_id, configure, start,
        dequeue, requeue, stop, close_camera,
    };
    return &table;
}
