import Foundation

/// The processes of process group `group` that have not ended (zombies, which only wait to be
/// reaped, do not count), from /proc.
public func livingProcesses(inGroup group: Int32) -> [Int32] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    return entries.compactMap { entry -> Int32? in
        guard let pid = Int32(entry),
            let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm) ": state, ppid, pgrp, …
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 2, fields[0] != "Z", Int32(fields[2]) == group else { return nil }
        return pid
    }
}

/// Waits up to `timeout` seconds for process group `group` to have no living process; returns
/// those still living then.
public func waitForProcessGroupToEnd(_ group: Int32, timeout: Double) -> [Int32] {
    let deadline = Date().addingTimeInterval(timeout)
    var living = livingProcesses(inGroup: group)
    while !living.isEmpty && Date() < deadline {
        usleep(20_000)
        living = livingProcesses(inGroup: group)
    }
    return living
}

/// Writes an executable `/bin/sh` script `name` with `body` into `directory`; returns its path.
public func writeScript(_ body: String, named name: String, in directory: TemporaryDirectory) throws -> String {
    let path = directory.file(name)
    try ("#!/bin/sh\n" + body).write(toFile: path, atomically: true, encoding: .utf8)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
    return path
}

/// The process ids a hook script wrote to `path`, one a line.
public func processIDs(inFile path: String) -> [Int32] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { Int32($0) }
}

/// Whether something accepts TCP connections on the loopback port (a server the test started is up).
public func loopbackAccepts(_ port: Int) -> Bool {
    guard let fd = loopbackConnection(port) else { return false }
    close(fd)
    return true
}

/// A TCP connection to the loopback port, or nil when nothing accepts there.
public func loopbackConnection(_ port: Int) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = loopbackAddress(port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
    guard connected else {
        close(fd)
        return nil
    }
    return fd
}

/// A TCP socket bound to a loopback port the kernel chose, listening or not (connections to
/// one not listening are refused: a server that is down), and its port; nil when it cannot be.
public func loopbackSocket(listening: Bool) -> (fd: Int32, port: Int)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = loopbackAddress(0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && (!listening || listen(fd, 16) == 0) && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else {
        close(fd)
        return nil
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// 127.0.0.1:`port`.
public func loopbackAddress(_ port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}
