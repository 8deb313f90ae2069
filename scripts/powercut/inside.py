#!/usr/bin/env python3
"""The power-cut suite's half inside the VM (scripts/powercut/run.sh starts it there).

For each file system: make it on a small loop device, put a dm-log-writes target on top,
record the agent (synthetic camera) into it until two clips are saved and a third is
being written, SIGKILL the agent, close the log. Then replay the log (logwrites.py) to
chosen flush points and to torn states after them, and for each state: the file system's
check, mount, `vigil repair` on every clip, the agent started (start-up repair, journal
rebuild) and stopped with SIGTERM; record what is on disk before and after, copy the clips
out (by content) for the host to decode. The verdicts are the host's (check.py).

Usage: inside.py --vigil BIN --out DIR --seed N --fs "ext4-ordered vfat ..."
                 [--intervals K] [--torn T]
Writes DIR/<fs>/{record.log, agent.log, base.img.gz, log.gz, log-info.json, states.jsonl}
and DIR/clips/<sha256>.mov.
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logwrites  # noqa: E402

# name: image MB, mkfs, mount type, mount options, check, check after the agent (a journaled
# file system: its check is run on what the kernel's recovery, repair and the agent left)
# or on the raw state before mounting (FAT, exFAT: no recovery, so the cut's own damage).
FILESYSTEMS = {
    "ext4-ordered": (32, ["mkfs.ext4", "-q", "-F", "-b", "4096"], "ext4", "data=ordered", ["fsck.ext4", "-fn"], True),
    "ext4-writeback": (32, ["mkfs.ext4", "-q", "-F", "-b", "4096"], "ext4", "data=writeback", ["fsck.ext4", "-fn"], True),
    "vfat": (32, ["mkfs.vfat"], "vfat", "", ["fsck.vfat", "-n"], False),
    "exfat": (32, ["mkfs.exfat"], "exfat", "", ["fsck.exfat", "-n"], False),
    "f2fs": (64, ["mkfs.f2fs", "-q", "-f"], "f2fs", "", ["fsck.f2fs", "-f", "--dry-run"], True),
}
# FAT and exFAT have no recovery of their own: a state the check finds damaged is repaired
# with the file system's tool before it is mounted, as a system's boot-time fsck would
# (else the kernel meets the damage, remounts read-only, and nothing of Vigil is tested).
FSCK_REPAIR = {
    "vfat": ["fsck.vfat", "-a"],
    "exfat": ["fsck.exfat", "-y"],
}

CONFIG = """# The power-cut suite's agent: the synthetic scene (motion 5-9 s after start, 25-31 s,
# ...) in small frames; with pre_roll 5, max_clip 10 and post_roll 15 the first event makes
# clips split by max_clip and the agent is killed in the third.
camera = {{ device = "synthetic"; name = "pc"; width = 320; height = 240; fps = 10.0; }};
encoder = {{ crf = 30.0; }};
recording = {{ pre_roll = 5.0; post_roll = 15.0; max_clip = 10.0; }};
storage = {{ path = "{path}"; min_free_mb = 0; max_size_mb = 0; max_age_days = 0; }};
log = {{ level = "info"; stats_interval = 0; }};
"""

T0 = time.time()


def say(*words):
    print(f"[{time.time() - T0:6.1f}s]", *words, flush=True)


def run(cmd, check=True, timeout=120, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stdout.strip()}")
    return r.returncode, r.stdout


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return h.hexdigest()
            h.update(block)


def listing(root):
    """{relative path: [size, sha256]} of the regular files under root (None: no root)."""
    if not os.path.isdir(root):
        return None
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(d, name)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                out[os.path.relpath(p, root)] = [os.path.getsize(p), sha256(p)]
            except OSError as e:  # a damaged file system (FAT after a cut) can refuse a read
                out[os.path.relpath(p, root)] = [-1, f"unreadable: {e}"]
    return out


def mark(dm, text):
    # One word: dm-log-writes takes exactly "mark <text>".
    subprocess.run(["dmsetup", "message", dm, "0", "mark", text.replace(" ", "_")], check=False)


class Agent:
    """vigil run, its stderr copied to a file and watched."""

    def __init__(self, vigil, config, log_path, dm=None):
        self.lines = []
        self.saved = []
        self.opened = []
        self.running = threading.Event()
        self.dm = dm
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([vigil, "run", "--config", config], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.log.write(line)
            self.log.flush()
            self.lines.append(line)
            msg = field(line, "msg")
            if msg == "vigil running":
                self.running.set()
            elif msg == "clip saved":
                self.saved.append(line)
                if self.dm:
                    mark(self.dm, "saved:" + field(line, "file"))
            elif msg in ("clip started", "clip continues in a new part"):
                self.opened.append(line)
                if self.dm:
                    mark(self.dm, "opened:" + field(line, "file"))
        self.running.set()

    def stop(self, sig, timeout):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            rc = f"hung (killed after {timeout} s)"
        self.reader.join(5)
        self.log.close()
        return rc


def field(line, name):
    """A logfmt field's value."""
    key = f" {name}="
    at = line.find(key)
    if at < 0:
        return None
    at += len(key)
    if line[at : at + 1] == '"':
        end = line.find('"', at + 1)
        return line[at + 1 : end]
    end = line.find(" ", at)
    return line[at : end if end >= 0 else len(line)].strip()


class Slot:
    """Where one worker mounts a file system's states: a mount point, the agent's
    configuration for it, the image brought forward through the log, the state's image."""

    def __init__(self, fs, name):
        self.fs = fs
        self.work = os.path.join(fs.work, name)
        self.mnt = os.path.join(self.work, "mnt")
        os.makedirs(self.mnt)
        self.storage = os.path.join(self.mnt, "vigil")
        self.config = os.path.join(self.work, "vigil.conf")
        with open(self.config, "w") as f:
            f.write(CONFIG.format(path=self.storage))
        self.state = os.path.join(self.work, "state.img")
        self.image = None  # logwrites.Image of cur.img, made on first use

    def mount(self, device):
        fs = self.fs
        opts = ",".join(o for o in (fs.options, "loop" if not device.startswith("/dev/") else "") if o)
        cmd = ["mount", "-t", fs.type] + (["-o", opts] if opts else []) + [device, self.mnt]
        return run(cmd, check=False)


class FileSystem:
    def __init__(self, name, args, out):
        self.name = name
        self.size_mb, self.mkfs, self.type, self.options, self.fsck, self.fsck_after = FILESYSTEMS[name]
        self.args = args
        self.work = os.path.join(args.work, name)
        self.out = os.path.join(out, name)
        os.makedirs(self.work)
        os.makedirs(self.out, exist_ok=True)
        self.dm = "powercut-" + name
        self.rec = Slot(self, "record")
        self.mnt = self.rec.mnt
        self.slots = {}
        self.lock = threading.Lock()
        self.records = None
        self.log = self.base = None

    # ------------------------------------------------------------------ recording
    def record(self):
        base = os.path.join(self.work, "base.img")
        logimg = os.path.join(self.work, "log.img")
        with open(base, "wb") as f:
            f.truncate(self.size_mb << 20)
        with open(logimg, "wb") as f:
            f.truncate(512 << 20)
        run(self.mkfs + [base])
        data = os.path.join(self.work, "data.img")
        shutil.copyfile(base, data)
        _, dev = run(["losetup", "-f", "--show", data])
        _, logdev = run(["losetup", "-f", "--show", logimg])
        dev, logdev = dev.strip(), logdev.strip()
        _, sectors = run(["blockdev", "--getsz", dev])
        run(["dmsetup", "create", self.dm, "--table", f"0 {sectors.strip()} log-writes {dev} {logdev}"])
        mark(self.dm, "mkfs")
        rc, text = self.rec.mount(f"/dev/mapper/{self.dm}")
        if rc != 0:
            raise RuntimeError(f"mount {self.name}: {text}")
        mark(self.dm, "mounted")
        agent = Agent(self.args.vigil, self.rec.config, os.path.join(self.out, "record.log"), dm=self.dm)
        started = time.time()
        # Two clips saved and a third open for a few fragments, then a kill: no clean stop.
        killed_in = None
        while time.time() - started < self.args.record_limit and agent.proc.poll() is None:
            if len(agent.saved) >= 2 and len(agent.opened) >= 3:
                if killed_in is None:
                    killed_in = time.time() + self.args.open_seconds
                elif time.time() >= killed_in:
                    break
            time.sleep(0.2)
        mark(self.dm, "kill")
        rc = agent.stop(signal.SIGKILL, 10)
        mark(self.dm, "killed")
        recorded = time.time() - started
        run(["umount", self.mnt])
        run(["dmsetup", "remove", self.dm])
        run(["losetup", "-d", dev, logdev])
        os.unlink(data)
        log = logwrites.Log(logimg)
        with open(logimg, "rb") as src, gzip.open(os.path.join(self.out, "log.gz"), "wb", compresslevel=1) as dst:
            left = log.end
            while left:
                block = src.read(min(left, 1 << 20))
                dst.write(block)
                left -= len(block)
        with open(base, "rb") as src, gzip.open(os.path.join(self.out, "base.img.gz"), "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        info = {
            "fs": self.name, "entries": len(log.entries), "flushes": len(log.flushes()), "log_bytes": log.end,
            "marks": log.marks(), "saved": [{"file": field(l, "file"), "frames": int(field(l, "frames"))} for l in agent.saved],
            "opened": [field(l, "file") for l in agent.opened], "agent_exit": rc, "recorded_s": round(recorded, 1),
            "size_mb": self.size_mb, "mount": [self.type, self.options],
        }
        with open(os.path.join(self.out, "log-info.json"), "w") as f:
            json.dump(info, f, indent=1)
        self.log, self.base = log, base
        say(f"{self.name}: recorded {recorded:.0f} s, {len(agent.saved)} clips saved, {len(log.entries)} log entries, "
            f"{len(log.flushes())} flushes, {log.end >> 10} KiB of log")
        if len(agent.saved) < 2 or len(agent.opened) < 3:
            say(f"{self.name}: WARNING: the recording did not reach two saved clips and a third open one")
        return log, base, logimg, info

    # ------------------------------------------------------------------ states
    def choose(self, log):
        """The flush points whose states are tested, each with torn states after it."""
        flushes = log.flushes()
        nonempty = [k for k in flushes if log.pieces_between(k + 1, logwrites.next_flush(log, k))]
        rng = random.Random(f"{self.args.seed}/{self.name}/choose")
        # The intervals just before the agent said a clip was opened or saved hold the
        # creation of files and directories and the close's steps: half the picks there.
        near = []
        for index, text in log.marks():
            if text.startswith(("saved:", "opened:")):
                before = [k for k in nonempty if k < index][-3:]
                near.extend(k for k in before if k not in near)
        chosen = set(rng.sample(near, min(len(near), self.args.intervals // 2)))
        rest = [k for k in nonempty if k not in chosen]
        chosen.update(rng.sample(rest, min(len(rest), self.args.intervals - len(chosen))))
        return sorted(chosen)

    def jobs(self):
        """The states to test, as jobs for the workers: a flush point and its torn states
        each, and END; a worker's jobs on one file system go forward through the log."""
        log = self.log
        chosen = self.choose(log)
        say(f"{self.name}: testing flush points {chosen} with {self.args.torn} torn states after each, and END")
        self.records = open(os.path.join(self.out, "states.jsonl"), "w")
        self.pending = len(chosen) + 1
        return [(self, k) for k in chosen] + [(self, None)]

    def run_job(self, worker, k):
        slot = self.slots.get(worker)
        if slot is None:
            slot = self.slots[worker] = Slot(self, f"w{worker}")
            cur = os.path.join(slot.work, "cur.img")
            shutil.copyfile(self.base, cur)
            slot.image = logwrites.Image(self.log, cur)
        log, image = self.log, slot.image
        todo = [None] + list(range(self.args.torn)) if k is not None else [None]
        for j in todo:
            started = time.time()
            if k is None:
                image.apply_through(len(log.entries) - 1)
                state_id, how = "END", {}
            else:
                image.apply_through(k)
                state_id, how = (f"F{k}", {}) if j is None else (f"T{k}.{j}", None)
            shutil.copyfile(image.path, slot.state)
            if how is None:
                pieces, kept, how = logwrites.torn_choice(log, k, j, self.args.seed, self.name)
                torn = logwrites.Image(log, slot.state)
                torn.apply_pieces(pieces, kept)
                torn.close()
                how["kept_pieces"] = [[pieces[i][0], pieces[i][1], pieces[i][2]] for i in kept]
            record = {"fs": self.name, "id": state_id, "at": k if k is not None else len(log.entries), "how": how, "times": {}}
            try:
                self.check_state(slot, record)
            except Exception as e:  # noqa: BLE001 - recorded, the host reports it
                record["error"] = f"{type(e).__name__}: {e}"
                run(["umount", slot.mnt], check=False)
            record["seconds"] = round(time.time() - started, 2)
            with self.lock:
                self.records.write(json.dumps(record) + "\n")
                self.records.flush()
            say(f"{self.name} {state_id}: {record['seconds']} s " + " ".join(f"{n} {t}" for n, t in record["times"].items())
                + (f" ERROR {record['error']}" if "error" in record else ""))
        with self.lock:
            self.pending -= 1
            if self.pending == 0:
                self.records.close()
                for slot in self.slots.values():
                    slot.image.close()

    def check_state(self, slot, record):
        state = slot.state
        times = record["times"]
        clock = [time.time()]

        def lap(name):
            now = time.time()
            times[name] = round(now - clock[0], 2)
            clock[0] = now

        if not self.fsck_after:
            record["fsck"] = run(self.fsck + [state], check=False)
            if record["fsck"][0] != 0 and self.name in FSCK_REPAIR:
                record["fsck_repair"] = run(FSCK_REPAIR[self.name] + [state], check=False)
            lap("fsck")
        rc, text = slot.mount(state)
        lap("mount")
        record["mount"] = [rc, text.strip()]
        if rc != 0:
            return
        try:
            record["files_before"] = listing(slot.storage)
            clips = sorted(p for p in (record["files_before"] or {}) if p.endswith(".mov"))
            if clips:
                record["repair"] = run([self.args.vigil, "repair"] + clips, check=False, cwd=slot.storage)
                lap("repair")
            log_path = os.path.join(slot.work, "agent.log")
            agent = Agent(self.args.vigil, slot.config, log_path)
            agent.running.wait(60)
            rc = agent.stop(signal.SIGTERM, 30)
            record["agent"] = {"exit": rc, "came_up": any(field(l, "msg") == "vigil running" for l in agent.lines), "log": "".join(agent.lines)}
            lap("agent")
            record["files_after"] = after = listing(slot.storage)
            for path in after or {}:
                if path.endswith(".mov") and after[path][0] >= 0:
                    keep = os.path.join(self.args.out, "clips", after[path][1] + ".mov")
                    if not os.path.exists(keep):
                        part = f"{keep}.{threading.get_ident()}.part"
                        shutil.copyfile(os.path.join(slot.storage, path), part)
                        os.rename(part, keep)
            journal = os.path.join(slot.storage, "events.jsonl")
            if os.path.isfile(journal):
                with open(journal, "rb") as f:
                    record["journal"] = f.read().decode("utf-8", "replace")
            lap("copy")
        finally:
            rc, text = run(["umount", slot.mnt], check=False)
            if rc != 0:
                record["umount"] = text
        if self.fsck_after:
            record["fsck"] = run(self.fsck + [state], check=False)
            lap("fsck")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vigil", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", required=True)
    p.add_argument("--fs", required=True)
    p.add_argument("--intervals", type=int, default=8)
    p.add_argument("--torn", type=int, default=2)
    p.add_argument("--record-limit", type=float, default=90)
    p.add_argument("--open-seconds", type=float, default=3)
    p.add_argument("--work", default="/run/powercut")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    unknown = [name for name in args.fs.split() if name not in FILESYSTEMS]
    if unknown:
        p.error(f"unknown file systems {unknown}; known: {' '.join(FILESYSTEMS)}")
    args.out = os.path.abspath(args.out)
    os.environ["DM_DISABLE_UDEV"] = "1"  # no udev in the VM: libdevmapper makes the nodes
    os.makedirs(args.work, exist_ok=True)
    run(["mount", "-t", "tmpfs", "-o", "size=1600m", "tmpfs", args.work])
    os.makedirs(os.path.join(args.out, "clips"), exist_ok=True)
    status = 0
    filesystems = [FileSystem(name, args, args.out) for name in args.fs.split()]
    # Recording is in real time (the camera's clock): every file system at once.
    started = time.time()
    errors = {}

    def record(fs):
        try:
            fs.record()
        except Exception as e:  # noqa: BLE001
            errors[fs.name] = f"{type(e).__name__}: {e}"
            say(f"{fs.name}: FAILED to record: {errors[fs.name]}")
            run(["umount", fs.mnt], check=False)
            run(["dmsetup", "remove", fs.dm], check=False)

    threads = [threading.Thread(target=record, args=(fs,)) for fs in filesystems]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recorded = time.time()
    jobs = [job for fs in filesystems if fs.name not in errors for job in fs.jobs()]
    # Two workers (the VM's two processors), each taking every other job: a worker's jobs
    # on a file system stay in log order, so its image only moves forward.
    def work(worker):
        for fs, k in jobs[worker :: args.workers]:
            fs.run_job(worker, k)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    finished = time.time()
    times = {"record_s": round(recorded - started, 1), "states_s": round(finished - recorded, 1), "workers": args.workers, "errors": errors}
    say(f"recorded {times['record_s']} s, states {times['states_s']} s")
    if errors:
        status = 1
    with open(os.path.join(args.out, "vm-times.json"), "w") as f:
        json.dump(times, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
