#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

// Linux calls glibc has no wrapper for, or wraps variadically (syscall), which Swift cannot
// call.

/// Makes the calling thread (not the process) yield to the others: its I/O at the lowest
/// best-effort priority (ioprio_set, IOPRIO_CLASS_BE level 7) and its CPU at nice 10. Returns
/// 0, or -1 with errno set when either could not be changed.
static inline int vigil_thread_background(void) {
    const int ioprioWhoProcess = 1, ioprioClassBestEffort = 2, ioprioClassShift = 13;
    pid_t thread = (pid_t)syscall(SYS_gettid);
    int io = (int)syscall(SYS_ioprio_set, ioprioWhoProcess, thread, (ioprioClassBestEffort << ioprioClassShift) | 7);
    int cpu = setpriority(PRIO_PROCESS, (id_t)thread, 10);
    return io == 0 && cpu == 0 ? 0 : -1;
}

/// Receives one datagram on `fd` (without waiting) into `buffer`, with the address it came
/// from and the local address it reached (IP_PKTINFO's ipi_spec_dst: for a multicast datagram,
/// the address of the interface it came in on; 0 when the socket does not ask for it).
/// Returns its length (the whole of it, even past `length`: MSG_TRUNC), or -1 with errno set.
/// `from` is a struct sockaddr_in, `local` a struct in_addr: void pointers, so that Swift calls
/// it from a file that names no socket type (POSIX's LinuxCalls.swift, which says why).
static inline long vigil_udp_receive(int fd, void *buffer, size_t length, void *fromAddress, void *localAddress) {
    struct sockaddr_in *from = fromAddress;
    struct in_addr *local = localAddress;
    char control[CMSG_SPACE(sizeof(struct in_pktinfo))];
    struct iovec part = {buffer, length};
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_name = from;
    message.msg_namelen = sizeof *from;
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    local->s_addr = 0;
    ssize_t received = recvmsg(fd, &message, MSG_DONTWAIT | MSG_TRUNC);
    if (received < 0) return received;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo info;
            memcpy(&info, CMSG_DATA(c), sizeof info);
            *local = info.ipi_spec_dst;
        }
    }
    return received;
}

/// The IPv4 addresses of this machine's interfaces that are up, not loopback, and take
/// multicast, at most `capacity` of them, into `addresses` (4 bytes each): SIOCGIFCONF and
/// SIOCGIFFLAGS on an AF_INET socket, not getifaddrs, which needs a netlink socket (the
/// packaged service's RestrictAddressFamilies refuses one). Returns how many, or -1 with errno.
static inline int vigil_multicast_interfaces(unsigned char *addresses, int capacity) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct ifreq requests[64];
    struct ifconf list;
    list.ifc_len = sizeof requests;
    list.ifc_req = requests;
    if (ioctl(fd, SIOCGIFCONF, &list) < 0) {
        int error = errno;
        close(fd);
        errno = error;
        return -1;
    }
    int count = 0;
    for (int i = 0; i < list.ifc_len / (int)sizeof(struct ifreq) && count < capacity; i++) {
        if (requests[i].ifr_addr.sa_family != AF_INET) continue;
        struct sockaddr_in address;
        memcpy(&address, &requests[i].ifr_addr, sizeof address);
        struct ifreq flags;
        memset(&flags, 0, sizeof flags);
        memcpy(flags.ifr_name, requests[i].ifr_name, IFNAMSIZ);
        if (ioctl(fd, SIOCGIFFLAGS, &flags) < 0) continue;
        if (!(flags.ifr_flags & IFF_UP) || (flags.ifr_flags & IFF_LOOPBACK) || !(flags.ifr_flags & IFF_MULTICAST)) {
            continue;
        }
        memcpy(addresses + 4 * count, &address.sin_addr, 4);
        count++;
    }
    close(fd);
    return count;
}

// The three below take no socket type in their signatures (void pointers, unsigned int for
// socklen_t): Swift code calls them from a file that imports this module alone
// (POSIX's LinuxCalls.swift), so the socket declarations Swift sees elsewhere stay Glibc's.

/// accept4 with `flags` (SOCK_NONBLOCK, SOCK_CLOEXEC): glibc declares it only for _GNU_SOURCE.
/// `address` is a struct sockaddr_storage, `length` its size.
static inline int vigil_accept4(int fd, void *address, unsigned int *length, int flags) {
    return (int)syscall(SYS_accept4, fd, (struct sockaddr *)address, (socklen_t *)length, flags);
}

/// pipe2 with `flags` (O_NONBLOCK, O_CLOEXEC), as above.
static inline int vigil_pipe2(int ends[2], int flags) {
    return (int)syscall(SYS_pipe2, ends, flags);
}

/// sendmmsg's message (glibc declares `struct mmsghdr` only for _GNU_SOURCE): the kernel's layout.
struct vigil_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

/// Sends `count` datagrams, each `base[starts[i] ..< ends[i]]`, to `to` without waiting, in as
/// few calls as the kernel allows (sendmmsg, 64 at a time). A datagram the socket's buffer
/// cannot take now, or that cannot be sent, is dropped, as a network drops one. Returns how
/// many were sent.
static inline int vigil_send_datagrams(
    int fd, const unsigned char *base, const long *starts, const long *ends, int count, const void *to,
    unsigned int length) {
    struct vigil_mmsghdr messages[64];
    struct iovec parts[64];
    int sent = 0, at = 0;
    while (at < count) {
        int batch = count - at < 64 ? count - at : 64;
        memset(messages, 0, sizeof messages);
        for (int i = 0; i < batch; i++) {
            parts[i].iov_base = (void *)(base + starts[at + i]);
            parts[i].iov_len = (size_t)(ends[at + i] - starts[at + i]);
            messages[i].msg_hdr.msg_name = (void *)to;
            messages[i].msg_hdr.msg_namelen = (socklen_t)length;
            messages[i].msg_hdr.msg_iov = &parts[i];
            messages[i].msg_hdr.msg_iovlen = 1;
        }
        long n = syscall(SYS_sendmmsg, fd, messages, (unsigned int)batch, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) {
            sent += (int)n;
            at += (int)n;
        } else {
            at += 1;  // dropped
        }
    }
    return sent;
}
