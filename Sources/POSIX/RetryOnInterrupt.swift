internal import Glibc

/// How a C call reports that it failed.
public enum FailureConvention: Sendable {
    /// -1, with the error in `errno`: open, read, write, ioctl, poll, waitpid, socket.
    case minusOneAndErrno
    /// A negative result is the error number negated; zero or more is the result: ALSA.
    case negatedErrorNumber
    /// Zero for success, else the error number itself: clock_nanosleep, the pthread calls.
    case errorNumber
}

/// Runs a C call, and again as long as it fails with EINTR (a signal arrived while it
/// waited): the one place where the project retries interrupted calls. Returns the call's
/// result; throws the error of any other failure.
///
///     let ready = try retryOnInterrupt { poll(&entry, 1, timeout) }
///     let frames = try retryOnInterrupt(.negatedErrorNumber) { snd_pcm_readi(pcm, buffer, count) }
///     try retryOnInterrupt(.errorNumber) { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil) }
@discardableResult
public func retryOnInterrupt<Result: BinaryInteger>(
    _ convention: FailureConvention = .minusOneAndErrno, _ call: () -> Result
) throws(SystemError) -> Result {
    while true {
        let result = call()
        let failure: SystemError? =
            switch convention {
            case .minusOneAndErrno: result == -1 ? .current : nil
            case .negatedErrorNumber: result < 0 ? SystemError(Int32(truncatingIfNeeded: -Int64(result))) : nil
            case .errorNumber: result != 0 ? SystemError(Int32(truncatingIfNeeded: result)) : nil
            }
        guard let failure else { return result }
        if failure.code != EINTR { throw failure }
    }
}
