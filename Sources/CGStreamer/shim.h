#include <stddef.h>
#include <stdint.h>
#include <gst/gst.h>
#include <gst/app/gstappsrc.h>
#include <gst/rtsp-server/rtsp-server.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

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

// At most `limit` clients at once. A newcomer beyond it pushes out the client that has waited
// longest without a session (one that connected and asked for nothing: a player sets up its
// session within milliseconds); when every client has one, the newcomer is hung up on. The
// socket is shut down from the server's main context once `client-connected` has returned, so
// the client leaves as one that hangs up does (its own watch sees the end and takes it out of
// the server's list). gst_rtsp_client_close is no way: called in the signal, before the client
// is attached, the client stays in the list for good; called later, the socket stays open while
// its watch holds it.
typedef struct {
    gint64 connected;
    gint64 last;
    guint64 received;
    gint64 tokens;
} vigil_rtsp_budget;

// Whether an address (text, as the connection says it) may try now (a sign-in throttle), and
// what became of a request that carried credentials: `signed_in` 1 when it was answered,
// 0 when refused 401 (`authorization`: the header it sent, `method` its method).
typedef gboolean (*vigil_rtsp_admit)(void *context, const char *address);
typedef void (*vigil_rtsp_signed)(
    void *context, const char *address, int signed_in, const char *authorization, const char *method);

typedef struct {
    guint limit;
    gint64 burst;
    vigil_rtsp_admit admit;
    vigil_rtsp_signed signed_in;
    void *context;
} vigil_rtsp_limits;

static void vigil_rtsp_sent(GstRTSPClient *client, GstRTSPContext *ctx, gpointer message, gpointer data)
{
    vigil_rtsp_limits *limits = (vigil_rtsp_limits *)data;
    GstRTSPMessage *response = (GstRTSPMessage *)message;
    if (limits->signed_in == NULL || ctx == NULL || ctx->request == NULL || response == NULL) return;
    if (gst_rtsp_message_get_type(response) != GST_RTSP_MESSAGE_RESPONSE) return;
    gchar *authorization = NULL;
    if (gst_rtsp_message_get_header(ctx->request, GST_RTSP_HDR_AUTHORIZATION, &authorization, 0) != GST_RTSP_OK)
        return;
    GstRTSPStatusCode code = GST_RTSP_STS_OK;
    GstRTSPMethod method = GST_RTSP_INVALID;
    if (gst_rtsp_message_parse_response(response, &code, NULL, NULL) != GST_RTSP_OK) return;
    if (gst_rtsp_message_parse_request(ctx->request, &method, NULL, NULL) != GST_RTSP_OK) return;
    GstRTSPConnection *connection = gst_rtsp_client_get_connection(client);
    const gchar *address = connection == NULL ? NULL : gst_rtsp_connection_get_ip(connection);
    if (address == NULL) return;
    if (code == GST_RTSP_STS_UNAUTHORIZED) {
        limits->signed_in(limits->context, address, 0, authorization, gst_rtsp_method_as_text(method));
    } else if (code < 400) {
        limits->signed_in(limits->context, address, 1, authorization, gst_rtsp_method_as_text(method));
    }
}

static gboolean vigil_rtsp_close_client(gpointer client)
{
    GstRTSPConnection *connection = gst_rtsp_client_get_connection(GST_RTSP_CLIENT(client));
    GSocket *socket = connection == NULL ? NULL : gst_rtsp_connection_get_read_socket(connection);
    if (socket != NULL) g_socket_shutdown(socket, TRUE, TRUE, NULL);
    return G_SOURCE_REMOVE;
}

static void vigil_rtsp_client_connected(GstRTSPServer *server, GstRTSPClient *client, gpointer data)
{
    vigil_rtsp_limits *limits = (vigil_rtsp_limits *)data;
    gint64 now = g_get_monotonic_time();
    vigil_rtsp_budget *budget = g_new0(vigil_rtsp_budget, 1);
    budget->connected = now;
    budget->last = now;
    budget->tokens = limits->burst;
    g_object_set_data_full(G_OBJECT(client), "vigil-budget", budget, g_free);

    GList *clients = gst_rtsp_server_client_filter(server, NULL, NULL);
    guint others = 0;
    GstRTSPClient *idle = NULL;
    gint64 idle_since = G_MAXINT64;
    for (GList *item = clients; item != NULL; item = item->next) {
        GstRTSPClient *other = GST_RTSP_CLIENT(item->data);
        if (other == client) continue;
        others++;
        vigil_rtsp_budget *b = (vigil_rtsp_budget *)g_object_get_data(G_OBJECT(other), "vigil-budget");
        gint64 since = b == NULL ? 0 : b->connected;
        if (since >= idle_since) continue;
        GList *sessions = gst_rtsp_client_session_filter(other, NULL, NULL);
        if (sessions == NULL) {
            idle = other;
            idle_since = since;
        }
        g_list_free_full(sessions, g_object_unref);
    }
    GSource *current = g_main_current_source();
    GstRTSPConnection *connection = gst_rtsp_client_get_connection(client);
    const gchar *address = connection == NULL ? NULL : gst_rtsp_connection_get_ip(connection);
    gboolean admitted = limits->admit == NULL || address == NULL || limits->admit(limits->context, address);
    if (limits->signed_in != NULL)
        g_signal_connect(client, "send-message", G_CALLBACK(vigil_rtsp_sent), limits);
    if ((others >= limits->limit || !admitted) && current != NULL) {
        GstRTSPClient *leaving = idle != NULL && admitted ? idle : client;
        vigil_rtsp_budget *b = (vigil_rtsp_budget *)g_object_get_data(G_OBJECT(leaving), "vigil-budget");
        if (b != NULL) b->connected = G_MAXINT64 / 2;  // not chosen again
        GSource *later = g_idle_source_new();
        g_source_set_callback(later, vigil_rtsp_close_client, g_object_ref(leaving), g_object_unref);
        g_source_attach(later, g_source_get_context(current));
        g_source_unref(later);
    }
    g_list_free_full(clients, g_object_unref);
}

// A server on `address`:`port` (0: any free one) serving `path` in its own main context
// (`context`, which the caller runs in a GMainLoop), `client_limit` clients at most, with the digest users of the htdigest
// file `password_file` in `realm` (NULL: no authentication). NULL when it cannot listen.
static inline GstRTSPServer *vigil_rtsp_server_start(
    GMainContext *context, const char *address, int port, const char *path, guint64 max_bytes, guint client_limit,
    gint64 burst, vigil_rtsp_admit admit, vigil_rtsp_signed signed_in, void *signin_context,
    const char *password_file, const char *realm, vigil_rtsp_media_made made, void *made_context,
    guint *source_id)
{
    GstRTSPServer *server = gst_rtsp_server_new();
    gchar service[16];
    g_snprintf(service, sizeof service, "%d", port);
    gst_rtsp_server_set_address(server, address);
    // A request's body (clients send none but SET_PARAMETER's few bytes) is refused past 16 KB.
    gst_rtsp_server_set_content_length_limit(server, 16384);
    gst_rtsp_server_set_service(server, service);
    // Room in the kernel's queue for a crowd that connects at once (gst-rtsp-server's default is 5).
    gst_rtsp_server_set_backlog(server, 64);
    vigil_rtsp_limits *limits = g_new0(vigil_rtsp_limits, 1);
    limits->limit = client_limit;
    limits->burst = burst;
    limits->admit = admit;
    limits->signed_in = signed_in;
    limits->context = signin_context;
    g_signal_connect_data(server, "client-connected", G_CALLBACK(vigil_rtsp_client_connected), limits,
                          (GClosureNotify)g_free, 0);

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

// The end of a client's stream: what was pushed is sent, then an RTCP BYE.
static inline void vigil_rtsp_end(GstElement *appsrc) { gst_app_src_end_of_stream(GST_APP_SRC(appsrc)); }

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

// What a client may send: gst-rtsp-server 1.22 keeps every header line of a request until its
// end comes (a client that sends header lines without end grows the agent by hundreds of MB)
// and holds a connection that never finishes a request for good. Each client has a budget of
// bytes it may send (`burst`, refilled at `rate` bytes a second: requests, keep-alives and RTCP
// receiver reports are a few hundred bytes a second at most), counted from the kernel's own
// count of what its socket received (TCP_INFO), and `grace` microseconds to set up a session
// (DESCRIBE and SETUP take a player milliseconds): one that sends more, or holds a place
// without a session, has its socket shut down (as `vigil_rtsp_close_client`).
typedef struct {
    gint64 now;
    gint64 burst;
    gint64 rate;
    gint64 grace;
    guint sent_too_much;
    guint idle;
} vigil_rtsp_policing;

static GstRTSPFilterResult vigil_rtsp_police_client(GstRTSPServer *server, GstRTSPClient *client, gpointer data)
{
    (void)server;
    vigil_rtsp_policing *p = (vigil_rtsp_policing *)data;
    GstRTSPConnection *connection = gst_rtsp_client_get_connection(client);
    GSocket *socket = connection == NULL ? NULL : gst_rtsp_connection_get_read_socket(connection);
    if (socket == NULL) return GST_RTSP_FILTER_KEEP;
    vigil_rtsp_budget *b = (vigil_rtsp_budget *)g_object_get_data(G_OBJECT(client), "vigil-budget");
    if (b == NULL) {
        b = g_new0(vigil_rtsp_budget, 1);
        b->connected = p->now;
        b->last = p->now;
        b->tokens = p->burst;
        g_object_set_data_full(G_OBJECT(client), "vigil-budget", b, g_free);
    }
    // The kernel's struct tcp_info, whose tcpi_bytes_received (Linux 4.1) sits at byte 128 on
    // every 64-bit architecture; glibc's struct stops before it (and linux/tcp.h's clashes
    // with glibc's in one program).
    unsigned char info[256];
    socklen_t length = sizeof info;
    guint64 received = b->received;
    if (getsockopt(g_socket_get_fd(socket), IPPROTO_TCP, TCP_INFO, info, &length) == 0 && length >= 136) {
        memcpy(&received, info + 128, sizeof received);
    }
    b->tokens += (p->now - b->last) * p->rate / 1000000;
    if (b->tokens > p->burst) b->tokens = p->burst;
    b->tokens -= (gint64)(received - b->received);
    b->received = received;
    b->last = p->now;
    gboolean close = FALSE;
    if (b->tokens < 0) {
        close = TRUE;
        p->sent_too_much++;
    } else if (p->now - b->connected > p->grace) {
        GList *sessions = gst_rtsp_client_session_filter(client, NULL, NULL);
        if (sessions == NULL) {
            close = TRUE;
            p->idle++;
        }
        g_list_free_full(sessions, g_object_unref);
    }
    if (close) {
        b->tokens = p->burst;  // said once; the socket is shut down
        b->connected = G_MAXINT64 / 2;
        g_socket_shutdown(socket, TRUE, TRUE, NULL);
    }
    return GST_RTSP_FILTER_KEEP;
}

// Looks at every client of `server` (see vigil_rtsp_budget); says how many were hung up on.
static inline void vigil_rtsp_police(
    GstRTSPServer *server, gint64 burst, gint64 rate, gint64 grace, guint *sent_too_much, guint *idle)
{
    vigil_rtsp_policing p = {g_get_monotonic_time(), burst, rate, grace, 0, 0};
    GList *left = gst_rtsp_server_client_filter(server, vigil_rtsp_police_client, &p);
    g_list_free_full(left, g_object_unref);
    *sent_too_much = p.sent_too_much;
    *idle = p.idle;
}
