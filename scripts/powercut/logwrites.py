#!/usr/bin/env python3
"""Reads a dm-log-writes log and rebuilds the disk states a power cut can leave.

The log format (Linux Documentation/admin-guide/device-mapper/log-writes.rst,
drivers/md/dm-log-writes.c): the super block at byte 0 (little-endian u64 magic
0x6a736677736872, u64 version 1, u64 number of entries, u32 sector size); then, from
byte `sectorsize` on, each entry: one sector whose start is the entry header (u64 sector,
u64 number of sectors, u64 flags, u64 data length; sectors in units of `sectorsize`),
followed by the data written (number of sectors × sectorsize bytes) unless the entry is a
discard or a mark. A mark carries its text in the header sector, after the header. The
entries are in the order the writes completed; a flush entry follows every write that had
completed before the flush was issued, so replaying up to a flush gives exactly what that
flush made durable.

States (ids are stable for a given log and seed):
  F<k>      every entry up to and including the flush entry k;
  T<k>.<j>  F<k>, plus a random subset of the writes between flush k and the next flush:
            the writes are cut into 4 KiB pieces (a disk keeps whole sectors, not whole
            requests); a cut point is drawn and each piece before it is kept at random,
            FUA pieces always (CrashMonkey's model of a power cut before the next flush);
  END       every entry (what the disk held when the log was closed).

Which flush points a run tests (`choose`) and which pieces a torn state keeps (`torn_choice`)
are drawn from random.Random seeded with a string of the seed, the file system's name and
the state: for one log, one seed and one name they are the same on every machine.

Command line (to rebuild a state of a kept log on any machine):
  logwrites.py info LOG
  logwrites.py build LOG BASE_IMAGE STATE_ID SEED KEY OUT_IMAGE
(KEY is the file system's name in the run, e.g. ext4-ordered: it is part of the seed; LOG
and BASE_IMAGE may be compressed with gzip or xz, as a run keeps them
(var/powercut/<time>/<fs>/log.gz, base.img.gz) and as the fixtures do
(scripts/powercut/fixtures/<recording>/log.xz, base.img.xz).) E.g., to look at a torn state
of exFAT that the gate replays:
  scripts/powercut/logwrites.py build scripts/powercut/fixtures/exfat/log.xz \
      scripts/powercut/fixtures/exfat/base.img.xz T317.2 14 exfat /tmp/state.img && fsck.exfat -n /tmp/state.img
"""
import gzip
import hashlib
import lzma
import os
import random
import shutil
import struct
import sys
import tempfile

MAGIC = 0x6A736677736872
FLUSH, FUA, DISCARD, MARK, METADATA = 1, 2, 4, 8, 16
PIECE = 4096


class Entry:
    __slots__ = ("index", "offset", "length", "flags", "data_at", "mark")

    def __init__(self, index, offset, length, flags, data_at, mark):
        self.index = index  # position in the log
        self.offset = offset  # byte offset on the device
        self.length = length  # bytes
        self.flags = flags
        self.data_at = data_at  # byte offset of the data in the log file (None: none)
        self.mark = mark

    def is_write(self):
        return self.length > 0 and not (self.flags & (MARK | DISCARD))

    def describe(self):
        names = [n for bit, n in ((FLUSH, "flush"), (FUA, "fua"), (DISCARD, "discard"), (MARK, "mark"), (METADATA, "meta")) if self.flags & bit]
        return f"#{self.index} {','.join(names) or 'write'} @{self.offset}+{self.length}" + (f" {self.mark!r}" if self.mark else "")


class Log:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            head = f.read(32)
            magic, version, count, sectorsize = struct.unpack_from("<QQQI", head)
            if magic != MAGIC:
                raise ValueError(f"{path}: not a dm-log-writes log (magic {magic:#x})")
            if version != 1:
                raise ValueError(f"{path}: log version {version}, only 1 is known")
            self.sectorsize = sectorsize
            self.entries = []
            at = sectorsize
            for index in range(count):
                f.seek(at)
                header = f.read(sectorsize)
                if len(header) < 32:
                    raise ValueError(f"{path}: entry {index} of {count} is past the end of the log")
                sector, sectors, flags, data_len = struct.unpack_from("<QQQQ", header)
                mark = None
                data_at = None
                at += sectorsize
                if flags & MARK:
                    mark = header[32 : 32 + data_len].decode("utf-8", "replace")
                elif not (flags & DISCARD) and sectors:
                    data_at = at
                    at += sectors * sectorsize
                self.entries.append(Entry(index, sector * sectorsize, sectors * sectorsize, flags, data_at, mark))
            self.end = at  # bytes of the log file in use

    def flushes(self):
        return [e.index for e in self.entries if e.flags & FLUSH]

    def marks(self):
        return [(e.index, e.mark) for e in self.entries if e.flags & MARK]

    def pieces_between(self, first, last):
        """The writes (and discards) of entries first..last-1, cut into pieces on PIECE
        boundaries of the device: (entry index, device offset, length, log offset or None
        for a discard, fua)."""
        out = []
        for e in self.entries[first:last]:
            if e.flags & MARK or e.length == 0:
                continue
            at, end = e.offset, e.offset + e.length
            while at < end:
                stop = min(end, (at // PIECE + 1) * PIECE)
                log_at = None if e.flags & DISCARD else e.data_at + (at - e.offset)
                out.append((e.index, at, stop - at, log_at, bool(e.flags & FUA)))
                at = stop
        return out


def choose(log, seed, key, intervals):
    """The flush points whose states a run tests: `intervals` of those followed by writes,
    half of them (when there are so many) among the three before each point where the agent
    said it opened or saved a clip (the intervals that hold the creation of files and
    directories and the close's steps), the rest anywhere."""
    flushes = log.flushes()
    nonempty = [k for k in flushes if log.pieces_between(k + 1, next_flush(log, k))]
    rng = random.Random(f"{seed}/{key}/choose")
    near = []
    for index, text in log.marks():
        if text.startswith(("saved:", "opened:")):
            before = [k for k in nonempty if k < index][-3:]
            near.extend(k for k in before if k not in near)
    chosen = set(rng.sample(near, min(len(near), intervals // 2)))
    rest = [k for k in nonempty if k not in chosen]
    chosen.update(rng.sample(rest, min(len(rest), intervals - len(chosen))))
    return sorted(chosen)


def next_flush(log, k):
    for e in log.entries[k + 1 :]:
        if e.flags & FLUSH:
            return e.index
    return len(log.entries)


def torn_choice(log, k, j, seed, key):
    """The pieces a torn state T<k>.<j> keeps, and how they were drawn."""
    pieces = log.pieces_between(k + 1, next_flush(log, k))
    rng = random.Random(f"{seed}/{key}/{k}/{j}")
    if not pieces:
        return pieces, [], {"pieces": 0}
    cut = rng.randint(1, len(pieces))
    keep_p = rng.choice((0.25, 0.5, 0.75))
    kept = [i for i in range(cut) if pieces[i][4] or rng.random() < keep_p]
    if not kept:
        kept = [rng.randrange(cut)]
    return pieces, kept, {"pieces": len(pieces), "cut": cut, "p": keep_p, "kept": len(kept)}


class Image:
    """A device image file being brought forward through the log."""

    def __init__(self, log, path):
        self.log = log
        self.path = path
        self.fd = os.open(path, os.O_RDWR)
        self.logfd = os.open(log.path, os.O_RDONLY)
        self.applied = 0  # entries applied so far

    def close(self):
        os.close(self.fd)
        os.close(self.logfd)

    def write_piece(self, offset, length, log_at):
        data = bytes(length) if log_at is None else os.pread(self.logfd, length, log_at)
        os.pwrite(self.fd, data, offset)

    def apply_through(self, last):
        """Applies entries up to and including `last`."""
        for e in self.log.entries[self.applied : last + 1]:
            if e.flags & MARK or e.length == 0:
                continue
            if e.flags & DISCARD:
                self.write_piece(e.offset, e.length, None)
            else:
                self.write_piece(e.offset, e.length, e.data_at)
        self.applied = max(self.applied, last + 1)

    def apply_pieces(self, pieces, kept):
        for i in kept:
            _, offset, length, log_at, _ = pieces[i]
            self.write_piece(offset, length, log_at)


def parse_state(state_id):
    if state_id == "END":
        return ("END", None, None)
    if state_id.startswith("F"):
        return ("F", int(state_id[1:]), None)
    if state_id.startswith("T"):
        k, j = state_id[1:].split(".")
        return ("T", int(k), int(j))
    raise ValueError(f"unknown state id {state_id}")


def build(log, base, state_id, seed, key, out):
    """Writes the state's image to `out` from the image before the log (`base`)."""
    kind, k, j = parse_state(state_id)
    shutil.copyfile(base, out)
    image = Image(log, out)
    try:
        if kind == "END":
            image.apply_through(len(log.entries) - 1)
            return {}
        image.apply_through(k)
        if kind == "T":
            pieces, kept, how = torn_choice(log, k, j, seed, key)
            image.apply_pieces(pieces, kept)
            return how
        return {}
    finally:
        image.close()


def sha256(path):
    """The SHA-256 of a file's bytes, in hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return h.hexdigest()
            h.update(block)


def open_compressed(path):
    """A file kept with gzip (.gz), xz (.xz) or as it is, opened for reading its bytes."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def decompress(path, out):
    """Writes the bytes of `path` (open_compressed) to `out`, leaving holes where a 64 KiB
    block is zeros (an image of a small file system is mostly zeros)."""
    zeros = bytes(1 << 16)
    with open_compressed(path) as f, open(out, "wb") as g:
        while True:
            block = f.read(1 << 16)
            if not block:
                break
            if block == zeros[: len(block)]:
                g.seek(len(block), os.SEEK_CUR)
            else:
                g.write(block)
        g.truncate()


def uncompressed(path, tmp):
    """`path` itself, or its bytes decompressed into the directory `tmp`."""
    if not path.endswith((".gz", ".xz")):
        return path
    plain = os.path.join(tmp, os.path.basename(path)[:-3])
    decompress(path, plain)
    return plain


def main(argv):
    if len(argv) >= 2 and argv[0] == "info":
        with tempfile.TemporaryDirectory() as tmp:
            log = Log(uncompressed(argv[1], tmp))
            print(f"{len(log.entries)} entries, sector size {log.sectorsize}, {log.end} bytes, {len(log.flushes())} flushes")
            for e in log.entries:
                if e.flags & (MARK | FLUSH | FUA) or "-v" in argv:
                    print(e.describe())
        return 0
    if len(argv) == 7 and argv[0] == "build":
        _, log_path, base, state_id, seed, key, out = argv
        with tempfile.TemporaryDirectory() as tmp:
            log_path, base = uncompressed(log_path, tmp), uncompressed(base, tmp)
            how = build(Log(log_path), base, state_id, seed, key, out)
        print(f"{out}: state {state_id} {how}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
