#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call: this takes
// the options Vigil sets as plain arguments.

// A daemon on its own threads serving the listening socket `listen_fd` (bound and listening;
// the daemon closes it when it stops): an internal polling thread (epoll where there is one)
// serves every connection, at most `connection_limit` at once (`per_ip_limit` from one
// address), each dropped after `timeout_seconds` without traffic and given `memory_limit`
// bytes for its request; strict about the protocol (an HTTP/1.1 request without a Host, a
// space in a path: 400); a connection may be suspended while its streamed body waits for
// data. `notify` is told, on the polling thread, of each connection that starts and closes.
// `random` (`random_size` bytes, kept while the daemon runs) seeds Digest
// authentication's nonces. With `tls_certificate` and `tls_key` (PEM text, kept while the
// daemon runs), it speaks HTTPS only (GnuTLS); NULL for plain HTTP. NULL when it cannot start
// (a certificate or key GnuTLS refuses, too).
static inline struct MHD_Daemon *vigil_mhd_start(
    int listen_fd, MHD_AccessHandlerCallback handler, void *handler_context,
    MHD_RequestCompletedCallback completed, void *completed_context, MHD_NotifyConnectionCallback notify,
    void *notify_context, unsigned int connection_limit,
    unsigned int per_ip_limit, unsigned int timeout_seconds, size_t memory_limit, size_t random_size,
    void *random, const char *tls_certificate, const char *tls_key)
{
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME;
    if (tls_certificate != NULL && tls_key != NULL) {
        flags |= MHD_USE_TLS;
    } else {
        // Options after MHD_OPTION_END are not read.
        tls_certificate = NULL;
        tls_key = NULL;
    }
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handler, handler_context,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket) listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
        MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
        MHD_OPTION_NOTIFY_CONNECTION, notify, notify_context,
        MHD_OPTION_STRICT_FOR_CLIENT, (int) 1,
        MHD_OPTION_DIGEST_AUTH_RANDOM, random_size, random,
        MHD_OPTION_NONCE_NC_SIZE, (unsigned int) 1024,
        tls_certificate != NULL ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, tls_certificate,
        MHD_OPTION_HTTPS_MEM_KEY, tls_key,
        MHD_OPTION_END);
}

// The socket of `connection` (MHD_get_connection_info is variadic), or -1.
static inline int vigil_mhd_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info != NULL ? info->connect_fd : -1;
}

// What the connection notification says of a connection that has just started.
static const enum MHD_ConnectionNotificationCode vigil_mhd_connection_started = MHD_CONNECTION_NOTIFY_STARTED;

// Whether this libmicrohttpd can speak HTTPS (Debian's is built with GnuTLS).
static inline int vigil_mhd_has_tls(void)
{
    return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}


// A body of unknown length made by `reader` as it is sent (chunked in HTTP/1.1), `block_size`
// bytes asked at a time; `done` is called with `context` when the response is gone.
static inline struct MHD_Response *vigil_mhd_stream_response(
    size_t block_size, MHD_ContentReaderCallback reader, void *context, MHD_ContentReaderFreeCallback done)
{
    return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block_size, reader, context, done);
}

// What a content reader returns at the end of its body.
static const ssize_t vigil_mhd_end_of_stream = MHD_CONTENT_READER_END_OF_STREAM;

// Digest authentication with MD5, the algorithm every browser speaks.
static const enum MHD_DigestAuthAlgorithm vigil_mhd_digest_md5 = MHD_DIGEST_ALG_MD5;

// The address of the client on `connection` (the library's copy, valid while the connection
// is); NULL when the library has none.
static inline const struct sockaddr *vigil_mhd_client_address(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info != NULL ? info->client_addr : NULL;
}

// Keeps at most about `bytes` of a streamed response in the kernel's send buffer of
// `connection`'s socket (the kernel doubles what it is given), instead of the megabytes its
// autotuning grows to: a live viewer that stops reading then holds a fraction of a second of
// video there, not tens of seconds it would have to play through first. Quietly nothing when
// the library has no socket for it.
static inline void vigil_mhd_limit_send_buffer(struct MHD_Connection *connection, int bytes)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info != NULL) (void)setsockopt(info->connect_fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}
