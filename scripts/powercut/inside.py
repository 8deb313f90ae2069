#!/usr/bin/env python3
"""The power-cut suite's half inside the VM (scripts/powercut/run.sh starts it there).

Two ways to the states, one way to test them:
  record  per file system: make it on a small loop device under a dm-log-writes target,
          record the agent (synthetic camera) into it until two clips are saved and a third
          is being written, SIGKILL the agent, close the log; then draw the states with the
          seed (logwrites.choose and torn_choice). `make test-powercut-explore` and
          `make powercut-record` (whose recordings become the fixtures).
  replay  the recordings and the states listed in OUT/plan.json (states.py prepare wrote
          it from scripts/powercut/states.list and the fixtures): nothing is recorded, the
          states are the same bytes on every run. `make test-powercut`.
Each state is rebuilt from its recording's log (logwrites.py) and then: the file system's
check, mount, `vigil repair` on every clip, the agent started (start-up repair, journal
rebuild) and stopped with SIGTERM; what is on disk before and after is recorded and the
clips are copied out (by content) for the host to decode. The verdicts are the host's
(check.py).

Usage: inside.py record --vigil BIN --out DIR --seed N --fs "ext4-ordered vfat ..."
                        [--intervals K] [--torn T] [--one-at-a-time]
       inside.py replay --vigil BIN --out DIR
Writes DIR/<recording>/{record.log (record), log.gz and base.img.gz (record), log-info.json,
vigil.conf (record), states.jsonl} and DIR/clips/<sha256>.mov; replay reads
DIR/<recording>/{log, base.img, log-info.json, vigil.conf}.
"""
import argparse
import gzip
import json
import os
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

# The recording's configuration, kept with it (vigil.conf; the storage directory is put in
# place of @STORAGE@). It has no `motion` group: CHECKING adds one.
CONFIG = """# The power-cut suite's agent: the synthetic scene (motion 5-9 s after start, 25-31 s,
# ...) in small frames; with pre_roll 5, max_clip 10 and post_roll 15 the first event makes
# clips split by max_clip and the agent is killed in the third.
camera = { device = "synthetic"; name = "pc"; width = 320; height = 240; fps = 10.0; };
encoder = { crf = 30.0; };
recording = { pre_roll = 5.0; post_roll = 15.0; max_clip = 10.0; };
storage = { path = "@STORAGE@"; min_free_mb = 0; max_size_mb = 0; max_age_days = 0; };
log = { level = "info"; stats_interval = 0; };
"""
# The agent started on a state repairs, rebuilds its journal and stops: it must record
# nothing of its own (no object of the scene covers 30 % of the picture, none stays 100
# frames), so that what it leaves depends on the state alone, however slow the machine.
CHECKING = """# Checking a state: no motion counts.
motion = { threshold = 0.3; min_frames = 100; };
"""

T0 = time.time()


def say(*words):
    print(f"[{time.time() - T0:6.1f}s]", *words, flush=True)


def run(cmd, check=True, timeout=120, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stdout.strip()}")
    return r.returncode, r.stdout


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
                out[os.path.relpath(p, root)] = [os.path.getsize(p), logwrites.sha256(p)]
            except OSError as e:  # a damaged file system (FAT after a cut) can refuse a read
                out[os.path.relpath(p, root)] = [-1, f"unreadable: {e}"]
    return out


def catalogue(root):
    """What the clip catalogue lists once the agent has stopped: {files, recording}, or {error}."""
    path = os.path.join(root, "catalogue.sqlite")
    if not os.path.isfile(path):
        return {"error": "there is no catalogue.sqlite"}
    try:
        import sqlite3
        db = sqlite3.connect(path)
        try:
            files = sorted(r[0] for r in db.execute("SELECT file FROM clip"))
            recording = sorted(r[0] for r in db.execute("SELECT file FROM recording"))
        finally:
            db.close()
        return {"files": files, "recording": recording}
    except Exception as e:  # noqa: BLE001 - said in the verdict
        return {"error": f"{type(e).__name__}: {e}"}


def mark(dm, text):
    # One word: dm-log-writes takes exactly "mark <text>".
    subprocess.run(["dmsetup", "message", dm, "0", "mark", text.replace(" ", "_")], check=False)


class Agent:
    """vigil run, its stderr copied to a file and watched. Each agent has a runtime
    directory of its own (its trigger socket): the workers' agents share a camera name."""

    def __init__(self, vigil, config, log_path, runtime, dm=None):
        self.lines = []
        self.saved = []
        self.opened = []
        self.running = threading.Event()
        self.dm = dm
        self.log_path = log_path
        os.makedirs(runtime, exist_ok=True)
        env = dict(os.environ, VIGIL_RUNTIME_DIR=runtime)
        self.proc = subprocess.Popen([vigil, "run", "--config", config], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace", env=env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.log_path, "w") as log:
            for line in self.proc.stderr:
                log.write(line)
                log.flush()
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
        """Signals the agent and waits for it, then for the end of its log: every line it
        wrote is in `lines` (what is judged must not depend on how busy the machine is)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = f"hung (killed after {timeout} s)"
        self.reader.join(120)
        if self.reader.is_alive():
            raise RuntimeError(f"the agent's stderr was still open 120 s after it exited ({self.log_path})")
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
    """Where one worker mounts a recording's states: a mount point, the agent's
    configuration for it, the image brought forward through the log, the state's image."""

    def __init__(self, rec, name, config):
        self.rec = rec
        self.work = os.path.join(rec.work, name)
        self.mnt = os.path.join(self.work, "mnt")
        os.makedirs(self.mnt)
        self.storage = os.path.join(self.mnt, "vigil")
        self.runtime = os.path.join(self.work, "run")
        self.config = os.path.join(self.work, "vigil.conf")
        with open(self.config, "w") as f:
            f.write(config.replace("@STORAGE@", self.storage))
        self.state = os.path.join(self.work, "state.img")
        self.image = None  # logwrites.Image of cur.img, made on first use

    def mount(self, device):
        rec = self.rec
        opts = ",".join(o for o in (rec.options, "loop" if not device.startswith("/dev/") else "") if o)
        cmd = ["mount", "-t", rec.type] + (["-o", opts] if opts else []) + [device, self.mnt]
        return run(cmd, check=False)


class Recording:
    """One file system's recording (new, or a fixture's) and the states tested from it."""

    def __init__(self, name, fs, args):
        self.name = name  # the directory in OUT: the file system's name, or a fixture's
        self.fs = fs
        self.size_mb, self.mkfs, self.type, self.options, self.fsck, self.fsck_after = FILESYSTEMS[fs]
        self.args = args
        self.work = os.path.join(args.work, name)
        self.out = os.path.join(args.out, name)
        os.makedirs(self.work)
        os.makedirs(self.out, exist_ok=True)
        self.dm = "powercut-" + name
        self.slots = {}
        self.lock = threading.Lock()
        self.records = None
        self.log = self.base = None
        self.states = None  # [(flush point or None for END, [state ids])]
        self.config = None
        self.images = set()

    # ------------------------------------------------------------------ recording
    def record(self):
        self.config = CONFIG
        with open(os.path.join(self.out, "vigil.conf"), "w") as f:
            f.write(CONFIG)
        rec = Slot(self, "record", CONFIG)
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
        rc, text = rec.mount(f"/dev/mapper/{self.dm}")
        if rc != 0:
            raise RuntimeError(f"mount {self.fs}: {text}")
        mark(self.dm, "mounted")
        agent = Agent(self.args.vigil, rec.config, os.path.join(self.out, "record.log"), rec.runtime, dm=self.dm)
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
        run(["umount", rec.mnt])
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
            "fs": self.fs, "entries": len(log.entries), "flushes": len(log.flushes()), "log_bytes": log.end,
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
        chosen = logwrites.choose(log, self.args.seed, self.fs, self.args.intervals)
        self.states = [(k, [f"F{k}"] + [f"T{k}.{j}" for j in range(self.args.torn)]) for k in chosen] + [(None, ["END"])]
        self.seed = self.args.seed
        say(f"{self.name}: testing flush points {chosen} with {self.args.torn} torn states after each, and END")

    # ------------------------------------------------------------------ a fixture
    def load(self, plan):
        """A recording the host prepared in OUT/<name>: its log, the image before it, its
        configuration, and the states to test (all of one seed)."""
        shutil.copyfile(os.path.join(self.out, "log"), os.path.join(self.work, "log"))
        self.log = logwrites.Log(os.path.join(self.work, "log"))
        self.base = os.path.join(self.work, "base.img")
        shutil.copyfile(os.path.join(self.out, "base.img"), self.base)
        with open(os.path.join(self.out, "vigil.conf")) as f:
            self.config = f.read()
        self.seed = plan["seed"]
        self.images = set(plan.get("images", []))  # states kept as images (OUT/<name>/<state>.img)
        by_point = {}
        for state_id in plan["states"]:
            kind, k, _ = logwrites.parse_state(state_id)
            by_point.setdefault(None if kind == "END" else k, []).append(state_id)
        order = lambda i: (i[0] != "F", i)  # noqa: E731 - the flush state before its torn states
        self.states = [(k, sorted(by_point[k], key=order)) for k in sorted(k for k in by_point if k is not None)]
        if None in by_point:
            self.states.append((None, ["END"]))
        say(f"{self.name}: {len(plan['states'])} listed states at {len(self.states)} points of the log")

    # ------------------------------------------------------------------ states
    def jobs(self):
        """The states to test, as jobs for the workers: a point of the log and its states
        each; a worker's jobs on one recording go forward through the log."""
        self.records = open(os.path.join(self.out, "states.jsonl"), "w")
        self.pending = len(self.states)
        return [(self, k, ids) for k, ids in self.states]

    def check_config(self):
        """The configuration of the agent started on each state, written for `vigil check`."""
        path = os.path.join(self.work, "check.conf")
        with open(path, "w") as f:
            f.write((self.config + CHECKING).replace("@STORAGE@", os.path.join(self.work, "check-storage")))
        return path

    def run_job(self, worker, k, ids):
        slot = self.slots.get(worker)
        if slot is None:
            slot = self.slots[worker] = Slot(self, f"w{worker}", self.config + CHECKING)
            cur = os.path.join(slot.work, "cur.img")
            shutil.copyfile(self.base, cur)
            slot.image = logwrites.Image(self.log, cur)
        log, image = self.log, slot.image
        for state_id in ids:
            started = time.time()
            kind, _, j = logwrites.parse_state(state_id)
            how = {}
            if state_id in self.images:
                shutil.copyfile(os.path.join(self.out, f"{state_id}.img"), slot.state)
                how["image"] = f"{state_id}.img"
            else:
                image.apply_through(len(log.entries) - 1 if kind == "END" else k)
                shutil.copyfile(image.path, slot.state)
            if kind == "T" and not how:
                pieces, kept, how = logwrites.torn_choice(log, k, j, self.seed, self.fs)
                torn = logwrites.Image(log, slot.state)
                torn.apply_pieces(pieces, kept)
                torn.close()
                how["kept_pieces"] = [[pieces[i][0], pieces[i][1], pieces[i][2]] for i in kept]
            record = {"fs": self.fs, "id": state_id, "at": k if k is not None else len(log.entries), "how": how, "times": {}}
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
            if record["fsck"][0] != 0 and self.fs in FSCK_REPAIR:
                record["fsck_repair"] = run(FSCK_REPAIR[self.fs] + [state], check=False)
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
            agent = Agent(self.args.vigil, slot.config, os.path.join(slot.work, "agent.log"), slot.runtime)
            # However slow the machine: an agent that does not come up in minutes is a failure.
            agent.running.wait(300)
            rc = agent.stop(signal.SIGTERM, 60)
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
            record["catalogue"] = catalogue(slot.storage)
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
    p.add_argument("mode", choices=("record", "replay"))
    p.add_argument("--vigil", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed")
    p.add_argument("--fs")
    p.add_argument("--intervals", type=int, default=10)
    p.add_argument("--torn", type=int, default=3)
    p.add_argument("--record-limit", type=float, default=120)
    p.add_argument("--open-seconds", type=float, default=3)
    p.add_argument("--one-at-a-time", action="store_true", help="record the file systems one after the other, not at once")
    p.add_argument("--work", default="/run/powercut")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    args.out = os.path.abspath(args.out)
    if args.mode == "record":
        if not args.seed or not args.fs:
            p.error("record needs --seed and --fs")
        unknown = [name for name in args.fs.split() if name not in FILESYSTEMS]
        if unknown:
            p.error(f"unknown file systems {unknown}; known: {' '.join(FILESYSTEMS)}")
    os.environ["DM_DISABLE_UDEV"] = "1"  # no udev in the VM: libdevmapper makes the nodes
    os.makedirs(args.work, exist_ok=True)
    run(["mount", "-t", "tmpfs", "-o", "size=1600m", "tmpfs", args.work])
    os.makedirs(os.path.join(args.out, "clips"), exist_ok=True)
    status = 0
    started = time.time()
    errors = {}
    if args.mode == "record":
        recordings = [Recording(name, name, args) for name in args.fs.split()]

        def record(rec):
            try:
                rec.record()
            except Exception as e:  # noqa: BLE001
                errors[rec.name] = f"{type(e).__name__}: {e}"
                say(f"{rec.name}: FAILED to record: {errors[rec.name]}")
                run(["umount", os.path.join(rec.work, "record", "mnt")], check=False)
                run(["dmsetup", "remove", rec.dm], check=False)

        # Recording is in real time (the camera's clock): every file system at once, unless
        # the recording is to be kept (the agent then has the machine to itself).
        if args.one_at_a_time:
            for rec in recordings:
                record(rec)
        else:
            threads = [threading.Thread(target=record, args=(rec,)) for rec in recordings]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    else:
        with open(os.path.join(args.out, "plan.json")) as f:
            plan = json.load(f)
        recordings = []
        for name, entry in plan["recordings"].items():
            rec = Recording(name, entry["fs"], args)
            rec.load(entry)
            recordings.append(rec)
    recorded = time.time()
    for rec in recordings:
        if rec.name not in errors:
            rc, text = run([args.vigil, "check", "--config", rec.check_config()], check=False)
            if rc != 0:
                errors[rec.name] = f"the configuration the agent is started with on each state is refused: {text.strip()}"
                say(f"{rec.name}: NOT TESTED: {errors[rec.name]}")
    jobs = [job for rec in recordings if rec.name not in errors for job in rec.jobs()]

    # Two workers (the VM's two processors), each taking every other job: a worker's jobs
    # on a recording stay in log order, so its image only moves forward.
    def work(worker):
        for rec, k, ids in jobs[worker :: args.workers]:
            rec.run_job(worker, k, ids)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    finished = time.time()
    times = {"record_s": round(recorded - started, 1), "states_s": round(finished - recorded, 1), "workers": args.workers, "errors": errors}
    say(f"{'recorded' if args.mode == 'record' else 'loaded'} {times['record_s']} s, states {times['states_s']} s")
    if errors:
        status = 1
    with open(os.path.join(args.out, "vm-times.json"), "w") as f:
        json.dump(times, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
