#include <stddef.h>
#include <stdint.h>
#include <gst/gst.h>
#include <gst/app/gstappsrc.h>
#include <gst/rtsp-server/rtsp-server.h>

// GObject's property setters, signal connections and GstRTSPToken/roles are variadic or
// macros, which Swift cannot call: these take what Vigil sets as plain arguments.

// Called (on a thread of gst-rtsp-server's) when a client's media is made: `appsrc` is its
// source (a reference the callee owns: gst_object_unref it when done).
typedef void (*vigil_rtsp_media_made)(void *context, GstElement *appsrc);

// Each client its own media (not shared): its pipeline starts at the newest keyframe the feed
// has. `appsrc` is live, in time format, never blocks the pusher, and drops its oldest
// buffers past `max_bytes` (a client that does not keep up loses picture, the feeder never
// waits). rtph264pay inserts no SPS and PPS of its own (it would put them before every slice
// of a keyframe, between the slices of one picture): the feeder puts them before each keyframe.
static void vigil_rtsp_media_configure(GstRTSPMediaFactory *factory, GstRTSPMedia *media, gpointer data);

typedef struct {
    vigil_rtsp_media_made made;
    void *context;
    guint64 max_bytes;
} vigil_rtsp_factory_data;

static void vigil_rtsp_media_configure(GstRTSPMediaFactory *factory, GstRTSPMedia *media, gpointer data)
{
    (void)factory;
    vigil_rtsp_factory_data *d = (vigil_rtsp_factory_data *)data;
    GstElement *bin = gst_rtsp_media_get_element(media);
    GstElement *appsrc = gst_bin_get_by_name_recurse_up(GST_BIN(bin), "video");
    gst_object_unref(bin);
    if (appsrc == NULL) return;
    g_object_set(appsrc, "is-live", TRUE, "format", GST_FORMAT_TIME, "do-timestamp", FALSE, "block", FALSE,
                 "max-bytes", d->max_bytes, "max-buffers", (guint64)0, "max-time", (guint64)0, NULL);
    // GST_APP_LEAKY_TYPE_DOWNSTREAM (1.20): past max-bytes the oldest buffer queued goes.
    g_object_set(appsrc, "leaky-type", 2, NULL);
    d->made(d->context, appsrc);
}

// At most `limit` clients at once: one more has its socket shut down just after it connects,
// from the server's main context once `client-connected` has returned, so it leaves as a client
// that hangs up does (its own watch sees the end and takes it out of the server's list).
// gst_rtsp_client_close is no way: called in the signal, before the client is attached, the
// client stays in the list for good; called later, the socket stays open while its watch holds it.
static gboolean vigil_rtsp_close_client(gpointer client)
{
    GstRTSPConnection *connection = gst_rtsp_client_get_connection(GST_RTSP_CLIENT(client));
    GSocket *socket = connection == NULL ? NULL : gst_rtsp_connection_get_read_socket(connection);
    if (socket != NULL) g_socket_shutdown(socket, TRUE, TRUE, NULL);
    return G_SOURCE_REMOVE;
}

static void vigil_rtsp_client_connected(GstRTSPServer *server, GstRTSPClient *client, gpointer data)
{
    guint limit = GPOINTER_TO_UINT(data);
    GList *clients = gst_rtsp_server_client_filter(server, NULL, NULL);
    guint others = 0;
    for (GList *item = clients; item != NULL; item = item->next) {
        if (item->data != client) others++;
    }
    g_list_free_full(clients, g_object_unref);
    GSource *current = g_main_current_source();
    if (others < limit || current == NULL) return;
    GSource *later = g_idle_source_new();
    g_source_set_callback(later, vigil_rtsp_close_client, g_object_ref(client), g_object_unref);
    g_source_attach(later, g_source_get_context(current));
    g_source_unref(later);
}

// A server on `address`:`port` (0: any free one) serving `path` in its own main context
// (`context`, which the caller runs in a GMainLoop), `client_limit` clients at most, with the digest users of the htdigest
// file `password_file` in `realm` (NULL: no authentication). NULL when it cannot listen.
static inline GstRTSPServer *vigil_rtsp_server_start(
    GMainContext *context, const char *address, int port, const char *path, guint64 max_bytes, guint client_limit,
    const char *password_file, const char *realm, vigil_rtsp_media_made made, void *made_context,
    guint *source_id)
{
    GstRTSPServer *server = gst_rtsp_server_new();
    gchar service[16];
    g_snprintf(service, sizeof service, "%d", port);
    gst_rtsp_server_set_address(server, address);
    gst_rtsp_server_set_service(server, service);
    g_signal_connect(server, "client-connected", G_CALLBACK(vigil_rtsp_client_connected),
                     GUINT_TO_POINTER(client_limit));

    GstRTSPMediaFactory *factory = gst_rtsp_media_factory_new();
    gst_rtsp_media_factory_set_launch(
        factory,
        "( appsrc name=video ! rtph264pay name=pay0 pt=96 config-interval=0 )");
    gst_rtsp_media_factory_set_shared(factory, FALSE);
    gst_rtsp_media_factory_set_suspend_mode(factory, GST_RTSP_SUSPEND_MODE_NONE);
    gst_rtsp_media_factory_set_protocols(
        factory, GST_RTSP_LOWER_TRANS_UDP | GST_RTSP_LOWER_TRANS_TCP);
    vigil_rtsp_factory_data *data = g_new0(vigil_rtsp_factory_data, 1);
    data->made = made;
    data->context = made_context;
    data->max_bytes = max_bytes;
    g_signal_connect_data(factory, "media-configure", G_CALLBACK(vigil_rtsp_media_configure), data,
                          (GClosureNotify)g_free, 0);

    if (password_file != NULL && realm != NULL) {
        GstRTSPAuth *auth = gst_rtsp_auth_new();
        gst_rtsp_auth_set_supported_methods(auth, GST_RTSP_AUTH_DIGEST);
        gst_rtsp_auth_set_realm(auth, realm);
        GstRTSPToken *token = gst_rtsp_token_new("media.factory.role", G_TYPE_STRING, "user", NULL);
        gboolean parsed = gst_rtsp_auth_parse_htdigest(auth, password_file, token);
        gst_rtsp_token_unref(token);
        if (!parsed) {
            g_object_unref(auth);
            g_object_unref(factory);
            g_object_unref(server);
            return NULL;
        }
        gst_rtsp_media_factory_add_role(
            factory, "user", GST_RTSP_PERM_MEDIA_FACTORY_ACCESS, G_TYPE_BOOLEAN, TRUE,
            GST_RTSP_PERM_MEDIA_FACTORY_CONSTRUCT, G_TYPE_BOOLEAN, TRUE, NULL);
        gst_rtsp_server_set_auth(server, auth);
        g_object_unref(auth);
    }

    GstRTSPMountPoints *mounts = gst_rtsp_server_get_mount_points(server);
    gst_rtsp_mount_points_add_factory(mounts, path, factory);
    g_object_unref(mounts);

    guint id = gst_rtsp_server_attach(server, context);
    if (id == 0) {
        g_object_unref(server);
        return NULL;
    }
    *source_id = id;
    return server;
}

// The caps of an H.264 stream of length-prefixed access units with `avcC` as codec_data.
static inline void vigil_rtsp_set_caps(GstElement *appsrc, int width, int height, const uint8_t *avcc, size_t size)
{
    GstBuffer *codec_data = gst_buffer_new_memdup(avcc, size);
    GstCaps *caps = gst_caps_new_simple(
        "video/x-h264", "stream-format", G_TYPE_STRING, "avc", "alignment", G_TYPE_STRING, "au", "width",
        G_TYPE_INT, width, "height", G_TYPE_INT, height, "codec_data", GST_TYPE_BUFFER, codec_data, NULL);
    gst_buffer_unref(codec_data);
    gst_app_src_set_caps(GST_APP_SRC(appsrc), caps);
    gst_caps_unref(caps);
}

// One access unit (length-prefixed NAL units) after `prefix` (the stream's SPS and PPS before a
// keyframe, length-prefixed too; 0 bytes otherwise), copied into one buffer; times in
// nanoseconds on the media's timeline. Returns the flow result (GST_FLOW_OK = 0; negative: the
// media is gone).
static inline int vigil_rtsp_push(
    GstElement *appsrc, const uint8_t *prefix, size_t prefix_size, const uint8_t *bytes, size_t size, uint64_t pts,
    uint64_t dts, uint64_t duration, int keyframe)
{
    GstBuffer *buffer = gst_buffer_new_allocate(NULL, prefix_size + size, NULL);
    if (buffer == NULL) return (int)GST_FLOW_ERROR;
    if (prefix_size > 0) gst_buffer_fill(buffer, 0, prefix, prefix_size);
    gst_buffer_fill(buffer, prefix_size, bytes, size);
    GST_BUFFER_PTS(buffer) = pts;
    GST_BUFFER_DTS(buffer) = dts;
    GST_BUFFER_DURATION(buffer) = duration;
    if (!keyframe) GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
    return (int)gst_app_src_push_buffer(GST_APP_SRC(appsrc), buffer);
}

// The port the server listens on (the one asked, or the kernel's choice for 0).
static inline int vigil_rtsp_server_port(GstRTSPServer *server) { return gst_rtsp_server_get_bound_port(server); }

// Calls `tick(context)` every `milliseconds` in `main`; returns its source.
static inline GSource *vigil_rtsp_add_tick(GMainContext *main, guint milliseconds, GSourceFunc tick, void *context)
{
    GSource *source = g_timeout_source_new(milliseconds);
    g_source_set_callback(source, tick, context, NULL);
    g_source_attach(source, main);
    return source;
}

// Ends every client session of `server` (at the stop).
static GstRTSPFilterResult vigil_rtsp_remove_client(GstRTSPServer *server, GstRTSPClient *client, gpointer data)
{
    (void)server; (void)client; (void)data;
    return GST_RTSP_FILTER_REMOVE;
}
static inline void vigil_rtsp_close_clients(GstRTSPServer *server)
{
    GList *left = gst_rtsp_server_client_filter(server, vigil_rtsp_remove_client, NULL);
    g_list_free(left);
}
