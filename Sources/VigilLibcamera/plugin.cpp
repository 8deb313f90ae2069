// libvigil-libcamera.so: the vigil binary's way to libcamera, through the C table of
// Sources/CLibcameraPlugin/vigil_libcamera.h (read it first). Built against the libcamera of the
// system it runs on (package vigil-libcamera); the vigil binary dlopens it.
//
// One CameraManager per process (libcamera allows no more), started when the first camera is
// listed or opened and stopped when the last is closed, so a camera that came back (a rebound
// driver) is found again by the next open even where libcamera sees no hotplug events.

#include <libcamera/libcamera.h>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../CLibcameraPlugin/vigil_libcamera.h"

using namespace libcamera;

namespace {

void fail(vigil_lc_error *error, int32_t code, const std::string &message)
{
    if (!error)
        return;
    error->code = code;
    std::snprintf(error->message, sizeof(error->message), "%s", message.c_str());
}

std::string builtVersion()
{
    return std::to_string(LIBCAMERA_VERSION_MAJOR) + "." + std::to_string(LIBCAMERA_VERSION_MINOR) + "." +
           std::to_string(LIBCAMERA_VERSION_PATCH);
}

void copyText(char *to, size_t size, const std::string &text)
{
    std::snprintf(to, size, "%s", text.c_str());
}

// The process's camera manager, shared by every open camera and listing. A plain pointer: it is
// deleted when its last user is done, never by the process's exit (which may come while a camera
// still runs, and libcamera aborts when a running camera's manager is destroyed).
std::mutex managerLock;
CameraManager *manager = nullptr;
int managerUsers = 0;
// Set once a camera vanished while it streamed and libcamera was not told (see
// heldDeviceVanished): that camera can be neither stopped nor freed, nor its manager, and the
// manager would abort when the camera came back under the same id. libcamera cannot be used
// again in this process.
bool poisoned = false;
std::string poisonedBy;

CameraManager *takeManager(vigil_lc_error *error)
{
    std::lock_guard<std::mutex> hold(managerLock);
    if (poisoned) {
        fail(error, ENOTRECOVERABLE, poisonedBy);
        return nullptr;
    }
    if (!manager) {
        auto *fresh = new CameraManager;
        int rc = fresh->start();
        if (rc < 0) {
            delete fresh;
            fail(error, -rc, "libcamera's camera manager did not start (" + std::string(std::strerror(-rc)) + ")");
            return nullptr;
        }
        manager = fresh;
    }
    managerUsers++;
    return manager;
}

void dropManager()
{
    std::lock_guard<std::mutex> hold(managerLock);
    if (--managerUsers == 0 && !poisoned) {
        manager->stop();
        delete manager;
        manager = nullptr;
    }
}

std::shared_ptr<Camera> findCamera(CameraManager *cm, const char *id, vigil_lc_error *error)
{
    auto cameras = cm->cameras();
    if (cameras.empty()) {
        fail(error, ENOENT, "libcamera finds no camera");
        return nullptr;
    }
    if (!id || !*id)
        return cameras.front();
    auto camera = cm->get(id);
    if (!camera) {
        std::string known;
        for (auto &c : cameras)
            known += (known.empty() ? "" : ", ") + c->id();
        fail(error, ENOENT, "libcamera has no camera '" + std::string(id) + "' (it has " + known + ")");
    }
    return camera;
}

void describeFormats(Camera &camera, vigil_lc_camera_info &info)
{
    auto config = camera.generateConfiguration({ StreamRole::VideoRecording });
    if (!config || config->empty())
        return;
    const StreamFormats &formats = config->at(0).formats();
    for (const PixelFormat &pixel : formats.pixelformats()) {
        if (info.format_count >= VIGIL_LC_MAX_FORMATS)
            break;
        vigil_lc_format &out = info.formats[info.format_count++];
        out.fourcc = pixel.fourcc();
        copyText(out.name, sizeof(out.name), pixel.toString());
        SizeRange range = formats.range(pixel);
        out.minimum = { range.min.width, range.min.height };
        out.maximum = { range.max.width, range.max.height };
        for (const Size &size : formats.sizes(pixel)) {
            if (out.size_count >= VIGIL_LC_MAX_SIZES)
                break;
            out.sizes[out.size_count++] = { size.width, size.height };
        }
    }
}

// Whether a camera device node this process holds open has been removed (its /proc/self/fd link
// then ends in " (deleted)"). libcamera 0.0.3 does not always tell a camera it was disconnected
// when its media device goes (the enumerator logs the removal, the camera never hears of it),
// and stopping such a camera aborts the process; this is how the plugin knows.
bool heldDeviceVanished()
{
    DIR *fds = opendir("/proc/self/fd");
    if (!fds)
        return false;
    bool vanished = false;
    while (dirent *entry = readdir(fds)) {
        std::string path = std::string("/proc/self/fd/") + entry->d_name;
        char target[256];
        ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = 0;
        std::string link(target);
        bool camera = link.rfind("/dev/media", 0) == 0 || link.rfind("/dev/video", 0) == 0 ||
                      link.rfind("/dev/v4l-subdev", 0) == 0;
        if (camera && link.size() > 10 && link.compare(link.size() - 10, 10, " (deleted)") == 0) {
            vanished = true;
            break;
        }
    }
    closedir(fds);
    return vanished;
}

} // namespace

struct vigil_lc_camera {
    std::shared_ptr<Camera> camera;
    std::unique_ptr<CameraConfiguration> config;
    std::unique_ptr<FrameBufferAllocator> allocator;
    std::vector<std::unique_ptr<Request>> requests;
    Stream *stream = nullptr;
    bool acquired = false;
    bool running = false;
    // Its device vanished while it ran: libcamera must not be asked to stop or release it.
    bool abandoned = false;

    std::mutex lock;
    std::condition_variable ready;
    std::deque<Request *> completed;
    bool disconnected = false;
    std::chrono::steady_clock::time_point lastCompletion = std::chrono::steady_clock::now();

    void complete(Request *request)
    {
        {
            std::lock_guard<std::mutex> hold(lock);
            completed.push_back(request);
            lastCompletion = std::chrono::steady_clock::now();
        }
        ready.notify_one();
    }

    void lost()
    {
        {
            std::lock_guard<std::mutex> hold(lock);
            disconnected = true;
        }
        ready.notify_all();
    }
};

namespace {

int32_t listCameras(vigil_lc_camera_info *cameras, uint32_t capacity, uint32_t *count, vigil_lc_error *error)
{
    CameraManager *cm = takeManager(error);
    if (!cm)
        return -1;
    {
        // Every reference to a camera must be gone before the manager stops: it deletes the
        // media devices the cameras hold.
        auto all = cm->cameras();
        *count = static_cast<uint32_t>(all.size());
        for (uint32_t i = 0; i < all.size() && i < capacity; i++) {
            Camera &camera = *all[i];
            vigil_lc_camera_info &info = cameras[i];
            std::memset(&info, 0, sizeof(info));
            copyText(info.id, sizeof(info.id), camera.id());
            const ControlList &properties = camera.properties();
            auto model = properties.get(properties::Model);
            copyText(info.model, sizeof(info.model), model ? *model : "");
            auto location = properties.get(properties::Location);
            info.location = location ? *location : -1;
            info.has_autofocus = camera.controls().count(&controls::AfMode) ? 1 : 0;
            info.has_frame_rate = camera.controls().count(&controls::FrameDurationLimits) ? 1 : 0;
            describeFormats(camera, info);
        }
    }
    dropManager();
    return 0;
}

vigil_lc_camera *openCamera(const char *id, vigil_lc_error *error)
{
    CameraManager *cm = takeManager(error);
    if (!cm)
        return nullptr;
    auto camera = findCamera(cm, id, error);
    if (!camera) {
        dropManager();
        return nullptr;
    }
    int rc = camera->acquire();
    if (rc < 0) {
        fail(error, -rc,
             rc == -EBUSY ? "camera " + camera->id() + " is in use by another program (another vigil, rpicam-apps, a libcamera app)"
                          : "acquiring camera " + camera->id() + " failed (" + std::strerror(-rc) + ")");
        camera.reset();
        dropManager();
        return nullptr;
    }
    auto *handle = new vigil_lc_camera;
    handle->camera = camera;
    handle->acquired = true;
    camera->requestCompleted.connect(handle, &vigil_lc_camera::complete);
    camera->disconnected.connect(handle, &vigil_lc_camera::lost);
    return handle;
}

const char *cameraID(vigil_lc_camera *camera)
{
    return camera->camera->id().c_str();
}

int32_t configure(vigil_lc_camera *handle, uint32_t width, uint32_t height, uint32_t buffers,
                  vigil_lc_stream *out, vigil_lc_error *error)
{
    Camera &camera = *handle->camera;
    const PixelFormat wanted[] = { formats::NV12, formats::YUV420 };
    std::unique_ptr<CameraConfiguration> config;
    for (const PixelFormat &pixel : wanted) {
        config = camera.generateConfiguration({ StreamRole::VideoRecording });
        if (!config || config->empty()) {
            fail(error, EINVAL, "camera " + camera.id() + " has no video stream");
            return -1;
        }
        StreamConfiguration &stream = config->at(0);
        stream.pixelFormat = pixel;
        stream.size = Size(width, height);
        stream.bufferCount = std::min<uint32_t>(std::max<uint32_t>(buffers, 2), VIGIL_LC_MAX_BUFFERS);
        if (config->validate() == CameraConfiguration::Invalid) {
            fail(error, EINVAL, "camera " + camera.id() + " refuses every configuration of its video stream");
            return -1;
        }
        if (config->at(0).pixelFormat == pixel)
            break;
    }
    // Neither 4:2:0 layout (vimc offers RGB only): what the camera chose, which vigil converts.
    StreamConfiguration &stream = config->at(0);
    if (stream.bufferCount > VIGIL_LC_MAX_BUFFERS)
        stream.bufferCount = VIGIL_LC_MAX_BUFFERS;
    int rc = camera.configure(config.get());
    if (rc < 0) {
        fail(error, -rc, "configuring camera " + camera.id() + " as " + stream.toString() + " failed (" + std::strerror(-rc) + ")");
        return -1;
    }
    auto allocator = std::make_unique<FrameBufferAllocator>(handle->camera);
    rc = allocator->allocate(stream.stream());
    if (rc <= 0) {
        fail(error, rc < 0 ? -rc : ENOMEM, "allocating buffers for camera " + camera.id() + " failed");
        return -1;
    }
    const auto &frameBuffers = allocator->buffers(stream.stream());
    if (frameBuffers.size() > VIGIL_LC_MAX_BUFFERS) {
        fail(error, EINVAL, "libcamera allocated " + std::to_string(frameBuffers.size()) + " buffers, more than vigil takes");
        return -1;
    }
    std::memset(out, 0, sizeof(*out));
    out->fourcc = stream.pixelFormat.fourcc();
    copyText(out->format_name, sizeof(out->format_name), stream.pixelFormat.toString());
    out->width = stream.size.width;
    out->height = stream.size.height;
    out->stride = stream.stride;
    out->frame_size = stream.frameSize;
    out->buffer_count = static_cast<uint32_t>(frameBuffers.size());
    handle->requests.clear();
    for (size_t i = 0; i < frameBuffers.size(); i++) {
        FrameBuffer *buffer = frameBuffers[i].get();
        const auto &planes = buffer->planes();
        if (planes.size() > VIGIL_LC_MAX_PLANES) {
            fail(error, EINVAL, "a buffer of camera " + camera.id() + " has " + std::to_string(planes.size()) + " planes");
            return -1;
        }
        out->buffers[i].plane_count = static_cast<uint32_t>(planes.size());
        for (size_t p = 0; p < planes.size(); p++) {
            out->buffers[i].planes[p] = { planes[p].fd.get(), planes[p].offset, planes[p].length };
        }
        auto request = camera.createRequest(i);
        if (!request || request->addBuffer(stream.stream(), buffer) < 0) {
            fail(error, ENOMEM, "making capture requests for camera " + camera.id() + " failed");
            return -1;
        }
        handle->requests.push_back(std::move(request));
    }
    handle->stream = stream.stream();
    handle->allocator = std::move(allocator);
    handle->config = std::move(config);
    return 0;
}

int32_t start(vigil_lc_camera *handle, int64_t frameDuration, vigil_lc_started *started, vigil_lc_error *error)
{
    Camera &camera = *handle->camera;
    ControlList controls(controls::controls);
    std::memset(started, 0, sizeof(*started));
    if (frameDuration > 0 && camera.controls().count(&controls::FrameDurationLimits)) {
        const int64_t limits[2] = { frameDuration, frameDuration };
        controls.set(controls::FrameDurationLimits, Span<const int64_t, 2>(limits));
        started->frame_duration_ns = frameDuration;
    }
    if (camera.controls().count(&controls::AfMode)) {
        controls.set(controls::AfMode, static_cast<int32_t>(controls::AfModeContinuous));
        started->autofocus = 1;
    }
    int rc = camera.start(&controls);
    if (rc < 0) {
        fail(error, -rc, "starting camera " + camera.id() + " failed (" + std::strerror(-rc) + ")");
        return -1;
    }
    {
        std::lock_guard<std::mutex> hold(handle->lock);
        handle->running = true;
    }
    for (auto &request : handle->requests) {
        rc = camera.queueRequest(request.get());
        if (rc < 0) {
            fail(error, -rc, "queueing a request on camera " + camera.id() + " failed (" + std::strerror(-rc) + ")");
            return -1;
        }
    }
    return 0;
}

int32_t dequeue(vigil_lc_camera *handle, int32_t timeoutMs, vigil_lc_frame *frame, vigil_lc_error *error)
{
    Request *request = nullptr;
    {
        std::unique_lock<std::mutex> hold(handle->lock);
        handle->ready.wait_for(hold, std::chrono::milliseconds(std::max(timeoutMs, 0)),
                               [handle] { return !handle->completed.empty() || handle->disconnected; });
        if (handle->completed.empty()) {
            if (handle->disconnected) {
                fail(error, ENODEV, "camera " + handle->camera->id() + " was disconnected");
                return -1;
            }
            if (std::chrono::steady_clock::now() - handle->lastCompletion > std::chrono::seconds(1) &&
                heldDeviceVanished()) {
                handle->abandoned = true;
                std::string message = "camera " + handle->camera->id() +
                                      " vanished while streaming, and libcamera " + builtVersion() +
                                      " cannot stop or reopen a camera it was not told had gone: vigil must be restarted to use it again";
                {
                    std::lock_guard<std::mutex> holdManager(managerLock);
                    poisoned = true;
                    poisonedBy = message;
                }
                fail(error, ENOTRECOVERABLE, message);
                return -1;
            }
            return 0;
        }
        request = handle->completed.front();
        handle->completed.pop_front();
    }
    std::memset(frame, 0, sizeof(*frame));
    frame->buffer = static_cast<uint32_t>(request->cookie());
    FrameBuffer *buffer = request->findBuffer(handle->stream);
    if (request->status() == Request::RequestCancelled) {
        frame->status = VIGIL_LC_FRAME_CANCELLED;
    } else if (!buffer || buffer->metadata().status != FrameMetadata::FrameSuccess) {
        frame->status = VIGIL_LC_FRAME_ERROR;
    } else {
        frame->status = VIGIL_LC_FRAME_OK;
    }
    if (buffer) {
        const FrameMetadata &metadata = buffer->metadata();
        frame->sequence = metadata.sequence;
        frame->buffer_timestamp_ns = static_cast<int64_t>(metadata.timestamp);
        const auto &planes = metadata.planes();
        for (size_t p = 0; p < planes.size() && p < VIGIL_LC_MAX_PLANES; p++)
            frame->bytes_used[p] = planes[p].bytesused;
    }
    auto sensor = request->metadata().get(controls::SensorTimestamp);
    if (sensor) {
        frame->has_sensor_timestamp = 1;
        frame->sensor_timestamp_ns = *sensor;
    }
    return 1;
}

int32_t requeue(vigil_lc_camera *handle, uint32_t index, vigil_lc_error *error)
{
    std::lock_guard<std::mutex> hold(handle->lock);
    if (!handle->running || index >= handle->requests.size())
        return 0;
    Request *request = handle->requests[index].get();
    request->reuse(Request::ReuseBuffers);
    int rc = handle->camera->queueRequest(request);
    if (rc < 0) {
        fail(error, -rc, "giving a buffer back to camera " + handle->camera->id() + " failed (" + std::strerror(-rc) + ")");
        return -1;
    }
    return 0;
}

void stop(vigil_lc_camera *handle)
{
    {
        std::lock_guard<std::mutex> hold(handle->lock);
        if (!handle->running)
            return;
        handle->running = false;
        // A camera whose device went away unannounced cannot be stopped: libcamera 0.0.3
        // asserts that every queued request came back, and a vanished device returns none
        // (the process aborts).
        if (!handle->disconnected && !handle->abandoned && heldDeviceVanished()) {
            handle->abandoned = true;
            std::lock_guard<std::mutex> holdManager(managerLock);
            poisoned = true;
            poisonedBy = "camera " + handle->camera->id() + " vanished while streaming: vigil must be restarted to use it again";
        }
    }
    if (!handle->abandoned)
        handle->camera->stop();  // cancels the queued requests; they complete before it returns
    std::lock_guard<std::mutex> hold(handle->lock);
    handle->completed.clear();
}

void closeCamera(vigil_lc_camera *handle)
{
    stop(handle);
    if (handle->abandoned) {
        // Freeing any of it would reach the vanished camera's pipeline (whose threads still
        // run): it is left as it is, for the rest of the process.
        dropManager();
        return;
    }
    handle->camera->requestCompleted.disconnect(handle);
    handle->camera->disconnected.disconnect(handle);
    handle->requests.clear();
    handle->allocator.reset();
    handle->config.reset();
    if (handle->acquired && !handle->abandoned)
        handle->camera->release();
    handle->camera.reset();
    delete handle;
    dropManager();
}

} // namespace

extern "C" __attribute__((visibility("default"))) const vigil_lc_plugin *vigil_libcamera_plugin(void)
{
    // libcamera's INFO lines (its version, each pipeline it matches) would go to the agent's log
    // at every open: warnings and errors only, unless LIBCAMERA_LOG_LEVELS says otherwise.
    setenv("LIBCAMERA_LOG_LEVELS", "*:WARN", 0);
    static const std::string version = builtVersion();
    static const vigil_lc_plugin table = {
        VIGIL_LIBCAMERA_ABI,
        sizeof(vigil_lc_plugin),
        version.c_str(),
        listCameras,
        openCamera,
        cameraID,
        configure,
        start,
        dequeue,
        requeue,
        stop,
        closeCamera,
    };
    return &table;
}
