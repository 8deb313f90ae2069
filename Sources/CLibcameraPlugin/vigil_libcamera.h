// The C ABI between the vigil binary and its libcamera plugin, libvigil-libcamera.so (package
// vigil-libcamera, source Sources/VigilLibcamera).
//
// libcamera has no stable ABI (its soname changes with every release), so the vigil binary does
// not link it: it dlopens the plugin, built against the libcamera of the system it runs on, and
// calls it through the table below. Any change to a struct or a function here must raise
// VIGIL_LIBCAMERA_ABI; a binary refuses a plugin whose number differs from its own.
#ifndef VIGIL_LIBCAMERA_H
#define VIGIL_LIBCAMERA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VIGIL_LIBCAMERA_ABI 1
// The one symbol the plugin exports: `const vigil_lc_plugin *vigil_libcamera_plugin(void)`.
#define VIGIL_LIBCAMERA_ENTRY "vigil_libcamera_plugin"

#define VIGIL_LC_MAX_PLANES 3
#define VIGIL_LC_MAX_BUFFERS 8
#define VIGIL_LC_MAX_SIZES 24
#define VIGIL_LC_MAX_FORMATS 12

// Why a call failed: an errno value (ENODEV: the camera is gone; EBUSY: another program has it;
// ENOENT: no such camera; EINVAL: a setting it cannot take; EIO: anything else) and a sentence.
typedef struct {
    int32_t code;
    char message[384];
} vigil_lc_error;

typedef struct {
    uint32_t width;
    uint32_t height;
} vigil_lc_size;

// One pixel format a camera's video stream offers, with its sizes.
typedef struct {
    uint32_t fourcc;  // DRM fourcc (libcamera's PixelFormat::fourcc())
    char name[32];    // libcamera's name for it ("NV12", "YUV420", "BGR888")
    vigil_lc_size minimum;
    vigil_lc_size maximum;
    uint32_t size_count;  // discrete sizes listed (at most VIGIL_LC_MAX_SIZES)
    vigil_lc_size sizes[VIGIL_LC_MAX_SIZES];
} vigil_lc_format;

// One camera, as `cam -l` lists it.
typedef struct {
    char id[256];
    char model[128];
    int32_t location;        // properties::Location, or -1 when the camera does not say
    int32_t has_autofocus;   // 1 when it has the AfMode control
    int32_t has_frame_rate;  // 1 when it has the FrameDurationLimits control
    uint32_t format_count;
    vigil_lc_format formats[VIGIL_LC_MAX_FORMATS];
} vigil_lc_camera_info;

// One plane of a buffer: a dmabuf descriptor (the plugin owns it), where the plane starts in
// it and how many bytes it spans.
typedef struct {
    int32_t fd;
    uint32_t offset;
    uint32_t length;
} vigil_lc_plane;

typedef struct {
    uint32_t plane_count;
    vigil_lc_plane planes[VIGIL_LC_MAX_PLANES];
} vigil_lc_buffer;

// What `configure` agreed to.
typedef struct {
    uint32_t fourcc;
    char format_name[32];
    uint32_t width;
    uint32_t height;
    uint32_t stride;      // bytes per row of the first plane
    uint32_t frame_size;  // bytes of a whole frame, 0 when libcamera does not say
    uint32_t buffer_count;
    vigil_lc_buffer buffers[VIGIL_LC_MAX_BUFFERS];
} vigil_lc_stream;

// What `start` set.
typedef struct {
    int64_t frame_duration_ns;  // FrameDurationLimits as set; 0 when the camera has no such control
    int32_t autofocus;          // 1 when continuous autofocus was switched on
} vigil_lc_started;

enum {
    VIGIL_LC_FRAME_OK = 0,
    VIGIL_LC_FRAME_ERROR = 1,      // the camera flagged the buffer (corrupt); requeue it
    VIGIL_LC_FRAME_CANCELLED = 2,  // the request was cancelled (stopping)
};

// A completed request: which buffer, the camera's frame number and its timestamps.
typedef struct {
    uint32_t buffer;
    uint32_t status;
    uint32_t sequence;
    int32_t has_sensor_timestamp;
    int64_t sensor_timestamp_ns;  // controls::SensorTimestamp
    int64_t buffer_timestamp_ns;  // FrameMetadata::timestamp
    uint32_t bytes_used[VIGIL_LC_MAX_PLANES];
} vigil_lc_frame;

typedef struct vigil_lc_camera vigil_lc_camera;

typedef struct {
    uint32_t abi;         // VIGIL_LIBCAMERA_ABI the plugin was built with
    uint32_t table_size;  // sizeof(vigil_lc_plugin) it was built with
    const char *libcamera_version;  // the libcamera it was built against ("0.0.3")
    // Fills up to `capacity` entries; `*count` is the number of cameras (may exceed capacity).
    int32_t (*list)(vigil_lc_camera_info *cameras, uint32_t capacity, uint32_t *count, vigil_lc_error *error);
    // Acquires camera `id` (NULL or "": the first one). NULL on failure.
    vigil_lc_camera *(*open)(const char *id, vigil_lc_error *error);
    // The id of the camera opened (valid until close).
    const char *(*camera_id)(vigil_lc_camera *camera);
    // Asks for NV12, then YUV420, then the first format the camera offers, at width×height, with
    // `buffers` buffers; allocates them. 0 or -1.
    int32_t (*configure)(vigil_lc_camera *camera, uint32_t width, uint32_t height, uint32_t buffers,
                         vigil_lc_stream *stream, vigil_lc_error *error);
    // Sets FrameDurationLimits to `frame_duration_ns` (when > 0 and the camera has it) and
    // continuous autofocus (when it has AfMode), queues every buffer and starts. 0 or -1.
    int32_t (*start)(vigil_lc_camera *camera, int64_t frame_duration_ns, vigil_lc_started *started,
                     vigil_lc_error *error);
    // Waits up to `timeout_ms` for a completed request: 1 with `frame` filled, 0 on timeout,
    // -1 when the camera failed (ENODEV once it was disconnected).
    int32_t (*dequeue)(vigil_lc_camera *camera, int32_t timeout_ms, vigil_lc_frame *frame, vigil_lc_error *error);
    // Gives buffer `buffer` back to the camera (any thread). 0, or -1 (then the stream is broken).
    int32_t (*requeue)(vigil_lc_camera *camera, uint32_t buffer, vigil_lc_error *error);
    // Stops streaming (idempotent); buffers stay allocated until close.
    void (*stop)(vigil_lc_camera *camera);
    // Stops, frees the buffers, releases the camera.
    void (*close)(vigil_lc_camera *camera);
} vigil_lc_plugin;

typedef const vigil_lc_plugin *(*vigil_libcamera_entry)(void);

#ifdef __cplusplus
}
#endif

#endif
