#!/usr/bin/env python3
"""The states `make test-powercut` replays: the listed set (scripts/powercut/states.list)
and the recordings they are rebuilt from (scripts/powercut/fixtures/).

A state of a power cut is a pure function of a recording (the dm-log-writes log of the
agent's block writes and the image before it), the state's id, the seed and the file
system's name (logwrites.py). The gate keeps recordings as fixtures, so it replays the same
states, byte for byte, on every run; a new recording (the agent's timing, the kernel's
writeback) would give other states on every run, and a gate that changes every run fails on
states no one has seen. Exploring new recordings is `make test-powercut-explore`.

states.list, one state a line:   FS STATE SEED RECORDING DIGEST   # where it came from
  FS         the file system (inside.py's FILESYSTEMS; the torn states' draw is keyed by it)
  STATE      F<k>, T<k>.<j> or END (logwrites.py)
  SEED       the seed of the torn states' draw; one seed per recording
  RECORDING  a directory of scripts/powercut/fixtures/: log.xz (the log), base.img.xz (the
             image before it), recording.json (what the agent said while recording, the
             commit that recorded it), vigil.conf (its configuration), and optionally
             <STATE>.img.xz (a state's image, used instead of rebuilding it from the log)
  DIGEST     the first 16 hex digits of the SHA-256 of the state's image: a run stops before
             the VM when a state is not the listed one
A torn state T<k>.<j> is judged against F<k> and END of its recording: both must be listed.
The lines between DRAWN_BEGIN and DRAWN_END are the draw from the file systems' own
recordings, rewritten by `make powercut-record`; every other line is a state that failed
once, with a comment saying where, and stays.

Commands (OUT and RUN are run directories, var/powercut/<time>):
  states.py prepare OUT [FS...]     check the list and the fixtures, rebuild every listed
                                    state on this machine and compare its digest, and write
                                    OUT/plan.json and each recording into OUT/<recording>/
                                    for the VM (inside.py replay)
  states.py adopt RUN               (make powercut-record) RUN's recordings become the
                                    fixtures of their file systems, and its states the draw
  states.py add RUN NAME STATE...   keep states a run found failing: RUN/NAME's recording
                                    becomes the fixture NAME-<RUN's name> (once) and the
                                    states are added to the list (with their F<k> and END)
  states.py keep RUN NAME STATE...  keep drawn states that failed in a gate run: they (with
                                    their F<k> and END) leave the drawn block and stay when
                                    the fixtures are re-recorded (the recording then moves to
                                    fixtures/NAME-<its run's name>)
  states.py lines RUN NAME STATE... the lines `add` would add (check.py prints them)
"""
import datetime
import json
import lzma
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logwrites  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LIST = os.path.join(HERE, "states.list")
FIXTURES = os.path.join(HERE, "fixtures")
DRAWN_BEGIN = "# --- drawn by make powercut-record"
DRAWN_END = "# --- end of the draw"
STATE_ID = re.compile(r"^(END|F\d+|T\d+\.\d+)$")


class ListError(Exception):
    pass


class Line:
    __slots__ = ("fs", "state", "seed", "recording", "digest", "origin", "number")

    def __init__(self, fs, state, seed, recording, digest, origin="", number=0):
        self.fs, self.state, self.seed, self.recording, self.digest = fs, state, seed, recording, digest
        self.origin = origin
        self.number = number

    def text(self):
        words = f"{self.fs} {self.state} {self.seed} {self.recording} {self.digest}"
        return words + (f"  # {self.origin}" if self.origin else "")


def parse(text, name="states.list"):
    """The list's lines: (header lines, drawn lines, other lines); ListError on a bad line."""
    header, drawn, others = [], [], []
    where = header
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith(DRAWN_BEGIN):
            where = drawn
            continue
        if stripped.startswith(DRAWN_END):
            where = others
            continue
        if not stripped or stripped.startswith("#"):
            if where is header:
                header.append(raw)
            continue
        words, _, origin = stripped.partition("#")
        words = words.split()
        if len(words) != 5:
            raise ListError(f"{name}:{number}: expected FS STATE SEED RECORDING DIGEST, found {stripped!r}")
        fs, state, seed, recording, digest = words
        if not STATE_ID.match(state):
            raise ListError(f"{name}:{number}: {state!r} is not a state (F<k>, T<k>.<j> or END)")
        if not re.fullmatch(r"[0-9a-f]{16}", digest):
            raise ListError(f"{name}:{number}: {digest!r} is not a digest (16 hex digits)")
        (drawn if where is drawn else others).append(
            Line(fs, state, seed, recording, digest, origin.strip(), number))
    return header, drawn, others


def read_list(path=None):
    path = path or LIST
    with open(path) as f:
        return parse(f.read(), os.path.basename(path))


def write_list(header, drawn_comment, drawn, others, path=None):
    path = path or LIST
    lines = list(header) + [f"{DRAWN_BEGIN} {drawn_comment}".rstrip()]
    lines += [line.text() for line in drawn]
    lines.append(DRAWN_END)
    lines += [line.text() for line in others]
    with open(path + ".new", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".new", path)


def drawn_comment():
    """What the list says of its draw (after DRAWN_BEGIN)."""
    with open(LIST) as f:
        for raw in f:
            if raw.startswith(DRAWN_BEGIN):
                return raw[len(DRAWN_BEGIN):].strip()
    return ""


def by_recording(lines):
    """{recording: [lines]}, checked: one file system and one seed per recording, every torn
    state's flush state and every recording's END listed, no state twice."""
    groups = {}
    for line in lines:
        groups.setdefault(line.recording, []).append(line)
    for name, group in groups.items():
        for attr in ("fs", "seed"):
            values = sorted({getattr(line, attr) for line in group})
            if len(values) > 1:
                raise ListError(f"states.list: recording {name} is listed with more than one {attr}: {', '.join(values)}")
        ids = [line.state for line in group]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ListError(f"states.list: recording {name} lists {', '.join(twice)} more than once")
        if "END" not in ids:
            raise ListError(f"states.list: recording {name} has no END line (its torn and flush states are judged against it)")
        for i in ids:
            if i.startswith("T") and "F" + i[1:].split(".")[0] not in ids:
                raise ListError(f"states.list: recording {name}: {i} is listed without F{i[1:].split('.')[0]}"
                                " (a torn state must keep what its flush state held)")
    return groups


def state_order(state_id):
    kind, k, j = logwrites.parse_state(state_id)
    return (kind == "END", k or 0, kind != "F", j or 0)


def short_digest(path):
    return logwrites.sha256(path)[:16]


def digests(log_path, base_path, state_ids, seed, fs, images=None):
    """{state: digest} of the states' images, rebuilt from the log going forward once
    (the images of `images`, {state: path}, taken as they are)."""
    images = images or {}
    log = logwrites.Log(log_path)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        cur = os.path.join(tmp, "cur.img")
        shutil.copyfile(base_path, cur)
        image = logwrites.Image(log, cur)
        try:
            for state_id in sorted(state_ids, key=state_order):
                kind, k, j = logwrites.parse_state(state_id)
                state = os.path.join(tmp, "state.img")
                if state_id in images:
                    out[state_id] = short_digest(images[state_id])
                    continue
                image.apply_through(len(log.entries) - 1 if kind == "END" else k)
                shutil.copyfile(cur, state)
                if kind == "T":
                    pieces, kept, _ = logwrites.torn_choice(log, k, j, seed, fs)
                    torn = logwrites.Image(log, state)
                    torn.apply_pieces(pieces, kept)
                    torn.close()
                out[state_id] = short_digest(state)
        finally:
            image.close()
    return out


def prepare(out, filesystems=None):
    """The gate's plan: every listed state (of `filesystems`, when given), checked against its
    digest, and each recording's files in OUT/<recording>/ for the VM."""
    _, drawn, others = read_list()
    groups = by_recording(drawn + others)
    if filesystems:
        groups = {name: group for name, group in groups.items() if group[0].fs in filesystems}
        if not groups:
            raise ListError(f"states.list lists no state of {' '.join(filesystems)}")
    plan = {"recordings": {}}
    mismatched = []
    for name, group in sorted(groups.items()):
        where = os.path.join(FIXTURES, name)
        for needed in ("log.xz", "base.img.xz", "recording.json", "vigil.conf"):
            if not os.path.isfile(os.path.join(where, needed)):
                raise ListError(f"states.list: recording {name}: {os.path.relpath(os.path.join(where, needed))} is missing")
        with open(os.path.join(where, "recording.json")) as f:
            info = json.load(f)
        fs, seed = group[0].fs, group[0].seed
        if info.get("fs") != fs:
            raise ListError(f"states.list: recording {name} is of {info.get('fs')}, listed as {fs}")
        dest = os.path.join(out, name)
        os.makedirs(dest, exist_ok=True)
        logwrites.decompress(os.path.join(where, "log.xz"), os.path.join(dest, "log"))
        logwrites.decompress(os.path.join(where, "base.img.xz"), os.path.join(dest, "base.img"))
        shutil.copyfile(os.path.join(where, "recording.json"), os.path.join(dest, "log-info.json"))
        shutil.copyfile(os.path.join(where, "vigil.conf"), os.path.join(dest, "vigil.conf"))
        images = {}
        for line in group:
            kept = os.path.join(where, f"{line.state}.img.xz")
            if os.path.isfile(kept):
                images[line.state] = os.path.join(dest, f"{line.state}.img")
                logwrites.decompress(kept, images[line.state])
        found = digests(os.path.join(dest, "log"), os.path.join(dest, "base.img"), [line.state for line in group], seed, fs, images)
        for line in group:
            if found[line.state] != line.digest:
                mismatched.append(f"  states.list:{line.number}: {fs} {line.state} of {name}: its image's digest is"
                                  f" {found[line.state]}, the list says {line.digest}")
        plan["recordings"][name] = {"fs": fs, "seed": seed, "states": sorted((line.state for line in group), key=state_order),
                                    "images": sorted(images)}
    if mismatched:
        raise ListError("the listed states are not the states the fixtures give:\n" + "\n".join(mismatched) + "\n"
                        "  A fixture or logwrites.py (how a state is rebuilt) changed. The gate replays fixed states: change"
                        " them on purpose only (make powercut-record re-records the draw, and keeps the states that failed"
                        " once); to keep an old state's bytes, put its image beside its recording as <STATE>.img.xz.")
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump(plan, f, indent=1)
    return plan


def xz(src, dst):
    """src (gzip, xz or plain) recompressed with xz -9e into dst."""
    with logwrites.open_compressed(src) as f, lzma.open(dst + ".part", "wb", preset=9 | lzma.PRESET_EXTREME) as g:
        shutil.copyfileobj(f, g, 1 << 20)
    os.replace(dst + ".part", dst)


def make_fixture(run_dir, name, fixture, how):
    """RUN/NAME's recording copied to fixtures/FIXTURE (replacing it)."""
    src = os.path.join(run_dir, name)
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(src, "log-info.json")) as f:
        info = json.load(f)
    dest = os.path.join(FIXTURES, fixture)
    part = dest + ".part"
    shutil.rmtree(part, ignore_errors=True)
    os.makedirs(part)
    xz(os.path.join(src, "log.gz"), os.path.join(part, "log.xz"))
    xz(os.path.join(src, "base.img.gz"), os.path.join(part, "base.img.xz"))
    shutil.copyfile(os.path.join(src, "vigil.conf"), os.path.join(part, "vigil.conf"))
    info["recorded"] = {"how": how, "run": os.path.basename(os.path.normpath(run_dir)), "commit": run.get("commit", "unknown"),
                        "date": datetime.date.today().isoformat()}
    with open(os.path.join(part, "recording.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(part, dest)
    return info


def adopt(run_dir):
    """make powercut-record: RUN's recordings become the file systems' fixtures and its
    states the draw."""
    header, _, others = read_list() if os.path.exists(LIST) else ([], [], [])
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    drawn = []
    for name in run["recordings"]:
        with open(os.path.join(run_dir, name, "log-info.json")) as f:
            info = json.load(f)
        if len(info["saved"]) < 2 or len(info["opened"]) < 3:
            raise ListError(f"{run_dir}/{name}: the recording did not reach two saved clips and a third open one"
                            f" ({len(info['saved'])} saved, {len(info['opened'])} opened): not kept")
    for name, fs in run["recordings"].items():
        states_path = os.path.join(run_dir, name, "states.jsonl")
        with open(states_path) as f:
            ids = [json.loads(line)["id"] for line in f]
        kept = [line for line in others if line.recording == name]
        if kept:
            # The states that failed once stay, with the recording they come from.
            with open(os.path.join(FIXTURES, name, "recording.json")) as f:
                old = f"{name}-{json.load(f).get('recorded', {}).get('run', 'before')}"
            if os.path.exists(os.path.join(FIXTURES, old)):
                raise ListError(f"fixtures/{old} exists: cannot move fixtures/{name} there")
            os.rename(os.path.join(FIXTURES, name), os.path.join(FIXTURES, old))
            for line in kept:
                line.recording = old
            print(f"fixtures/{name} moved to fixtures/{old}: it holds {len(kept)} kept states")
        make_fixture(run_dir, name, name, "make powercut-record")
        where = os.path.join(FIXTURES, name)
        with tempfile.TemporaryDirectory() as tmp:
            log = logwrites.uncompressed(os.path.join(where, "log.xz"), tmp)
            base = logwrites.uncompressed(os.path.join(where, "base.img.xz"), tmp)
            found = digests(log, base, ids, run["seed"], fs)
        drawn += [Line(fs, i, run["seed"], name, found[i]) for i in sorted(ids, key=state_order)]
        size = sum(os.path.getsize(os.path.join(where, n)) for n in os.listdir(where))
        print(f"fixtures/{name}: {len(ids)} states, {size >> 10} KiB")
    comment = f"(seed {run['seed']}, {datetime.date.today().isoformat()}, commit {run.get('commit', 'unknown')[:12]})"
    write_list(header or DEFAULT_HEADER.splitlines(), comment, drawn, others)
    print(f"{os.path.relpath(LIST)}: {len(drawn)} drawn states, {len(others)} kept from failures")


DEFAULT_HEADER = """# The states `make test-powercut` replays (scripts/powercut/states.py says how).
# FS STATE SEED RECORDING DIGEST  # where it came from"""


def add_lines(run_dir, name, state_ids, listed):
    """The lines that keep RUN/NAME's states (with the F<k> and END they are judged
    against), as Lines, leaving out what is listed."""
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    fs = run["recordings"][name]
    fixture = f"{name}-{os.path.basename(os.path.normpath(run_dir))}"
    summary = failures_of(run_dir, name)
    wanted = with_companions(state_ids)
    src = os.path.join(run_dir, name)
    with tempfile.TemporaryDirectory() as tmp:
        log = logwrites.uncompressed(os.path.join(src, "log.gz"), tmp)
        base = logwrites.uncompressed(os.path.join(src, "base.img.gz"), tmp)
        found = digests(log, base, wanted, run["seed"], fs)
    how = f"make test-powercut-explore SEED={run['seed']}, run {os.path.basename(os.path.normpath(run_dir))}, commit {run.get('commit', 'unknown')[:12]}"
    lines = []
    for i in wanted:
        if (fixture, i) in listed:
            continue
        if i in state_ids:
            what = "; ".join(summary.get(i, [])) or "failed"
            origin = f"failed in {how}: {what}"
        else:
            origin = judges(i, state_ids)
        lines.append(Line(fs, i, run["seed"], fixture, found[i], one_line(origin)))
    return fixture, lines


def with_companions(state_ids):
    """The states and those they are judged against (F<k> of each T<k>.<j>, END), in order."""
    wanted = set(state_ids) | {"END"}
    for i in state_ids:
        logwrites.parse_state(i)
        if i.startswith("T"):
            wanted.add("F" + i[1:].split(".")[0])
    return sorted(wanted, key=state_order)


def one_line(text, limit=400):
    """A comment of the list: one line, at most `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judges(state_id, state_ids):
    """The origin of a flush state or END listed because torn states are judged against it."""
    return f"judges {', '.join(i for i in state_ids if i != state_id and (state_id == 'END' or i.startswith('T' + state_id[1:] + '.')))}"


def failures_of(run_dir, name):
    """{state: [failures]} of RUN/NAME, as check.py wrote them ({} when unknown)."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            return json.load(f)["recordings"][name].get("failures", {})
    except (OSError, ValueError, KeyError):
        return {}


def keep(run_dir, name, state_ids):
    """States of the draw that failed in a gate run (RUN): moved with the states they are
    judged against out of the drawn block, so that they stay when the fixtures are
    re-recorded."""
    header, drawn, others = read_list()
    failures = failures_of(run_dir, name)
    wanted = with_companions(state_ids)
    moving = {line.state: line for line in drawn if line.recording == name and line.state in wanted}
    missing = [i for i in state_ids if i not in moving]
    if missing:
        raise ListError(f"recording {name} has no drawn state {', '.join(missing)}")
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    when = f"{datetime.date.today().isoformat()}, run {os.path.basename(os.path.normpath(run_dir))}, commit {run.get('commit', 'unknown')[:12]}"
    for i, line in moving.items():
        if i in state_ids:
            line.origin = one_line(f"failed in make test-powercut ({when}): " + ("; ".join(failures.get(i, [])) or "failed"))
        else:
            line.origin = judges(i, state_ids)
    moved = [moving[i] for i in wanted if i in moving]
    write_list(header, drawn_comment(), [line for line in drawn if line not in moved], others + moved)
    for line in moved:
        print(f"kept in {os.path.relpath(LIST)}: {line.text()}")


def add(run_dir, name, state_ids):
    header, drawn, others = read_list()
    listed = {(line.recording, line.state) for line in drawn + others}
    fixture, lines = add_lines(run_dir, name, state_ids, listed)
    if not os.path.isdir(os.path.join(FIXTURES, fixture)):
        make_fixture(run_dir, name, fixture, f"found failing by make test-powercut-explore: {' '.join(state_ids)}")
    write_list(header, drawn_comment(), drawn, others + lines)
    for line in lines:
        print(f"added to {os.path.relpath(LIST)}: {line.text()}")


def main(argv):
    try:
        if len(argv) >= 2 and argv[0] == "prepare":
            plan = prepare(os.path.abspath(argv[1]), argv[2:])
            for name, entry in plan["recordings"].items():
                print(f"power-cut gate: {name}: {len(entry['states'])} listed states ({entry['fs']}, seed {entry['seed']}), digests checked")
            return 0
        if len(argv) == 2 and argv[0] == "adopt":
            adopt(argv[1])
            return 0
        if len(argv) >= 4 and argv[0] == "keep":
            keep(argv[1], argv[2], argv[3:])
            return 0
        if len(argv) >= 4 and argv[0] in ("add", "lines"):
            if argv[0] == "add":
                add(argv[1], argv[2], argv[3:])
            else:
                _, drawn, others = read_list()
                listed = {(line.recording, line.state) for line in drawn + others}
                _, lines = add_lines(argv[1], argv[2], argv[3:], listed)
                for line in lines:
                    print(line.text())
            return 0
    except ListError as e:
        print(f"power-cut states: {e}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
