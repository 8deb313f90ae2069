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
static inline ssize_t vigil_udp_receive(
    int fd, void *buffer, size_t length, struct sockaddr_in *from, struct in_addr *local) {
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
