internal import Glibc

/// The terminal a descriptor may be (`isatty`), and typing on it unseen (`tcsetattr`).
public enum Terminal {
    /// Whether `descriptor` is a terminal (standard input typed at, not a pipe or a file).
    public static func isTerminal(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }

    /// Runs `body` with the terminal on `descriptor` not echoing what is typed (a password),
    /// what it had before put back afterwards; just runs `body` when it is not a terminal.
    /// Whether the echo was off is `body`'s argument.
    public static func withoutEcho<T>(_ descriptor: Int32, _ body: (_ quiet: Bool) -> T) -> T {
        var saved = termios()
        guard isTerminal(descriptor), tcgetattr(descriptor, &saved) == 0 else { return body(false) }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(descriptor, TCSAFLUSH, &silent)
        defer { tcsetattr(descriptor, TCSAFLUSH, &saved) }
        return body(true)
    }
}
