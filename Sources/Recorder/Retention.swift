import FoundationEssentials
import Media

/// Why retention deleted a clip.
public enum DeletionReason: Equatable, Sendable, CustomStringConvertible {
    case olderThan(days: Int)
    case storeLargerThan(bytes: Int64)
    case freeSpaceBelow(bytes: Int64)

    public var description: String {
        switch self {
        case .olderThan(let days): "older than \(days) days"
        case .storeLargerThan(let bytes): "clips take more than \(bytes >> 20) MB"
        case .freeSpaceBelow(let bytes): "less than \(bytes >> 20) MB free"
        }
    }
}

public struct Deletion: Equatable, Sendable {
    public var clip: StoredFile
    public var reason: DeletionReason
}

/// Which clips to delete: oldest first, when older than `maxAgeDays`, while all clips take
/// more than `maxSize`, or while the file system has less than `minFree` free. The clip being
/// written is never among them.
public struct RetentionPolicy: Equatable, Sendable {
    public var maxAgeDays: Int?
    public var maxSize: Int64?
    public var minFree: Int64

    public init(maxAgeDays: Int?, maxSize: Int64?, minFree: Int64) {
        self.maxAgeDays = maxAgeDays
        self.maxSize = maxSize
        self.minFree = minFree
    }

    public func deletions(clips: [StoredFile], now: Date, freeBytes: Int64, protected: Set<String>) -> [Deletion] {
        var candidates = clips.filter { !protected.contains($0.relativePath) }
            .sorted { ($0.modified, $0.relativePath) < ($1.modified, $1.relativePath) }
        var result: [Deletion] = []
        var total = clips.reduce(0) { $0 + $1.size }
        var free = freeBytes
        func take(_ reason: DeletionReason) {
            let clip = candidates.removeFirst()
            total -= clip.size
            free += clip.size
            result.append(Deletion(clip: clip, reason: reason))
        }
        if let days = maxAgeDays {
            let cutoff = now.addingTimeInterval(-Double(days) * 86_400)
            while let first = candidates.first, first.modified < cutoff { take(.olderThan(days: days)) }
        }
        if let maxSize {
            while total > maxSize, !candidates.isEmpty { take(.storeLargerThan(bytes: maxSize)) }
        }
        while free < minFree, !candidates.isEmpty { take(.freeSpaceBelow(bytes: minFree)) }
        return result
    }
}

/// The agent's own clips in the storage directory: the files whose names its pattern makes,
/// deleted oldest first as the retention policy says.
public struct ClipStore: Sendable {
    public let storage: any ClipStorage
    public let naming: ClipNaming

    public init(storage: any ClipStorage, naming: ClipNaming) {
        self.storage = storage
        self.naming = naming
    }

    /// Every file below the directory whose relative path the naming pattern makes.
    public func clips() throws(FileError) -> [StoredFile] {
        try storage.walk().filter { naming.matches($0.relativePath) }.sorted { $0.relativePath < $1.relativePath }
    }

    /// Deletes one clip, after checking that its name is one of this agent's (the storage
    /// checks again that it is a regular file, not a link).
    public func delete(_ clip: StoredFile) throws(FileError) {
        guard naming.matches(clip.relativePath), !clip.relativePath.split(separator: "/").contains("..") else {
            throw FileError(
                path: storage.path(clip.relativePath), operation: "delete",
                reason: "it is not a clip file of this agent; refusing")
        }
        try storage.delete(clip.relativePath)
    }

    /// Applies `policy` now: returns what it deleted, and the problems it met.
    public func sweep(
        _ policy: RetentionPolicy, now: Date = Date(), protected: Set<String>
    ) -> (deleted: [Deletion], errors: [FileError]) {
        let clips: [StoredFile]
        let free: Int64
        do {
            clips = try self.clips()
            free = try storage.freeBytes()
        } catch {
            return ([], [error])
        }
        var deleted: [Deletion] = []
        var errors: [FileError] = []
        for deletion in policy.deletions(clips: clips, now: now, freeBytes: free, protected: protected) {
            do {
                try delete(deletion.clip)
                deleted.append(deletion)
            } catch {
                errors.append(error)
            }
        }
        return (deleted, errors)
    }
}
