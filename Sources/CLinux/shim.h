#include <sys/resource.h>
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
