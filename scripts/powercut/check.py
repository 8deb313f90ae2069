#!/usr/bin/env python3
"""The power-cut suite's verdicts, on the host: reads what inside.py recorded in OUT and
decodes every distinct clip with ffprobe and ffmpeg (fast here; the VM is emulated).

Usage: check.py OUT [--keep-images N]

For every state: it mounted; the file system's check passed (ext4 and f2fs: after the
kernel's recovery, repair and the agent — it must be clean; FAT and exFAT have no recovery,
so the check of the raw state only reports the cut's own damage, counted apart, and their
own tool repairs it before the state is mounted, as a boot-time fsck would); the agent
came up and stopped with exit 0 and logged no error; every clip decodes cleanly (ffprobe
reads it, `ffmpeg -v error -i CLIP -f null -` prints nothing); every line of events.jsonl
is JSON and every clip on disk is named by one; the clip catalogue lists every clip on disk
and nothing else, and no clip is still said being recorded. A clip start-up repair cannot read is moved
aside as NAME.mov.damaged: that is the right outcome for a clip none of whose fragments had
been synced (a cut on exFAT can keep a new clip's directory entry and lose the allocation of
its first clusters, and the file system's repair then cuts its start), as long as its bytes
are the ones the clip had before repair (moved, not rewritten) and no NAME.mov is left beside
it; a saved clip, or one with synced frames in the state it is judged against, moved aside
is a failure. Durability, with no help from the agent:
the flush states in log order never lose a clip or a frame, and a torn state after flush k
has every clip of F<k> with at least its frames; every clip's frames are the first frames
of the same clip in END (compared packet by packet: a zero-filled fragment is caught);
a clip the agent logged as saved before the state's point in the log (a mark written when
the "clip saved" line came) is byte-identical to its END version, and END has every saved
clip with the frames the agent logged.

Prints per recording the states tested and failed, and each failure; exits 1 on any.
Writes OUT/verdicts.txt (one line a state: its verdict and what it came to; two runs of the
gate give the same file), OUT/report.txt and OUT/summary.json. Failing states are rebuilt
(logwrites.py) into OUT/<recording>/failed/<state>.img.gz, at most N per recording
(default 5); for a failing state of a new recording (make test-powercut-explore) it prints
the lines that add it to the gate's listed set (scripts/powercut/states.py add).
"""
import concurrent.futures
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logwrites  # noqa: E402
import states as statelist  # noqa: E402

# And the clips, and their snapshots (NAME.jpg); the clip catalogue and SQLite's files beside it.
OK_FILES = (".vigil.lock", "events.jsonl", "catalogue.sqlite", "catalogue.sqlite-wal", "catalogue.sqlite-shm")
DAMAGED = ".damaged"  # what start-up repair appends to the name of a clip it cannot read
# What fsck.fat and fsck.exfat say of any state taken while mounted (the volume's dirty
# flag), and their greetings and totals: not damage.
BENIGN_FSCK = re.compile(
    r"^(fsck\.fat |exfatprogs version|Dirty bit is set|\s*Automatically removing dirty bit|Leaving filesystem unchanged"
    r"|\S+: \d+ files, \d+/\d+ clusters|\S+: clean\.|.*(not unmounted cleanly|dirty))", re.I)


def decode(path):
    """{probe_ok, probe_err, decode_err, packets: [md5...]} of one clip, cached beside it."""
    cache = path[: -len(".mov")] + ".json"
    if os.path.exists(cache):
        with open(cache) as f:
            return json.load(f)
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,nb_frames", "-of", "json", path],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    with tempfile.NamedTemporaryFile("r", suffix=".framemd5") as md5:
        dec = subprocess.run(
            ["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "null", "-",
             "-map", "0:v:0", "-c", "copy", "-f", "framemd5", "-y", md5.name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        packets = [line.rsplit(",", 1)[1].strip() for line in md5.read().splitlines() if line and not line.startswith("#")]
    # The same words on every run: no path of this run, no address of ffmpeg's.
    tidy = lambda text: re.sub(r" @ 0x[0-9a-f]+\]", "]", text.replace(path, "the clip"))  # noqa: E731
    probe.stderr, dec.stderr = tidy(probe.stderr), tidy(dec.stderr)
    result = {
        "probe_ok": probe.returncode == 0 and not probe.stderr.strip(),
        "probe_err": (probe.stderr.strip() or f"exit {probe.returncode}")[:300] if probe.returncode or probe.stderr.strip() else "",
        "decode_err": (dec.stderr.strip() or (f"exit {dec.returncode}" if dec.returncode else ""))[:300],
        "packets": packets,
    }
    with open(cache + ".part", "w") as f:
        json.dump(result, f)
    os.rename(cache + ".part", cache)
    return result


def mov_files(listing, readable=True):
    return {p: v for p, v in (listing or {}).items() if p.endswith(".mov") and (v[0] >= 0 or not readable)}


def first_line(text, n=160):
    text = (text or "").strip().replace("\n", " | ")
    return text[:n] + ("…" if len(text) > n else "")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def damaged_files(listing):
    """{clip: [size, sha256]} of the clips moved aside as NAME.mov.damaged."""
    return {p[: -len(DAMAGED)]: v for p, v in (listing or {}).items() if p.endswith(".mov" + DAMAGED)}


def check_fs(out, name, decoded):
    """The verdicts on the states of the recording in OUT/<name>: (its log-info, the states,
    {state: [failures]}, {state: [notes]}, {state: [clips moved aside]})."""
    info = read_json(os.path.join(out, name, "log-info.json"))
    fs = info["fs"]
    states = read_jsonl(os.path.join(out, name, "states.jsonl"))
    by_id = {s["id"]: s for s in states}
    end = by_id.get("END")
    journaled = fs.startswith(("ext4", "f2fs"))
    saved_marks = [(i, t[len("saved:"):]) for i, t in info["marks"] if t.startswith("saved:")]
    failures = {}
    notes = {}
    aside = {}

    def fail(state, what):
        failures.setdefault(state["id"], []).append(what)

    def note(state, what):
        notes.setdefault(state["id"], []).append(what)

    def clips(state, readable=True):
        return mov_files(state.get("files_after"), readable)

    def frames(sha):
        return len(decoded[sha]["packets"])

    end_clips = clips(end) if end else {}
    for s in states:
        rc, text = s.get("fsck", [0, ""])
        if rc != 0:
            if journaled:
                fail(s, f"fsck (after repair and the agent) exit {rc}: " + first_line("\n".join(l for l in text.splitlines() if l.strip() and not l.startswith(("Pass ", "e2fsck ", "Info: ")))))
            else:
                found = [l.strip() for l in text.splitlines() if l.strip() and not BENIGN_FSCK.search(l)]
                if found:
                    note(s, "fsck")
                    note(s, "fsck: " + first_line(" ".join(found), 200))
        if "error" in s:
            fail(s, "the harness failed: " + s["error"])
            continue
        if s["mount"][0] != 0:
            fail(s, "does not mount: " + first_line(s["mount"][1]))
            continue
        if "repair" in s and s["repair"][0] not in (0, 65):
            fail(s, f"vigil repair exit {s['repair'][0]}: " + first_line(s["repair"][1]))
        agent = s.get("agent", {})
        if agent.get("exit") != 0 or not agent.get("came_up"):
            fail(s, f"the agent did not start and stop cleanly (exit {agent.get('exit')}, came up {agent.get('came_up')}): " + first_line(agent.get("log", "")[-300:]))
        for line in agent.get("log", "").splitlines():
            if "level=error" in line:
                fail(s, "the agent logged an error: " + first_line(line, 240))
        after = s.get("files_after") or {}
        for path in after:
            if not path.endswith((".mov", ".mov" + DAMAGED, ".jpg")) and path not in OK_FILES:
                note(s, f"other file left: {path}")
        # Clips moved aside: moved, not rewritten, and nothing left in their place.
        before = s.get("files_before") or {}
        for path, (size, sha) in damaged_files(after).items():
            aside.setdefault(s["id"], []).append(path)
            if path in after:
                fail(s, f"{path} was moved aside as {path}{DAMAGED} and is there too")
            if path + DAMAGED in before:
                continue  # there before repair and the agent: not their doing
            had = before.get(path)
            if had is None:
                fail(s, f"{path}{DAMAGED} is not a clip that was on disk before repair")
            elif had[0] >= 0 and size >= 0 and had[1] != sha:
                fail(s, f"{path}{DAMAGED}: its bytes are not the clip's before repair ({size} bytes, the clip had {had[0]}):"
                        " a clip moved aside must keep its bytes")
        for path, (size, sha) in list(clips(s, readable=False).items()):
            if size < 0:
                fail(s, f"{path}: {sha}")
                continue
            d = decoded[sha]
            if not d["probe_ok"]:
                fail(s, f"{path}: ffprobe: {d['probe_err']}")
            if d["decode_err"]:
                fail(s, f"{path}: ffmpeg decode: " + first_line(d["decode_err"]))
        # The journal.
        named = set()
        text = s.get("journal")
        if text is None:
            if clips(s):
                fail(s, "no events.jsonl, and clips on disk")
        else:
            for n, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
                try:
                    obj = json.loads(line)
                    named.add(obj.get("file"))
                except ValueError:
                    fail(s, f"events.jsonl line {n} is not JSON: {first_line(line, 80)!r}")
            for path in clips(s, readable=False):
                if path not in named:
                    fail(s, f"{path} is on disk but not in events.jsonl")
        # The catalogue, once the agent has stopped: every clip on disk (moved aside or not) in
        # it, nothing else, and no clip still said being recorded.
        if s.get("agent") is not None:
            cat = s.get("catalogue")
            if cat is None or "error" in cat:
                fail(s, "the clip catalogue could not be read: " + ((cat or {}).get("error") or "not recorded"))
            else:
                listed = set(cat["files"])
                on_disk = set(clips(s, readable=False)) | {p + DAMAGED for p in damaged_files(s.get("files_after"))}
                for path in sorted(on_disk - listed):
                    fail(s, f"{path} is on disk but not in the clip catalogue")
                for path in sorted(listed - on_disk):
                    fail(s, f"{path} is in the clip catalogue but not on disk")
                if cat["recording"]:
                    fail(s, "the clip catalogue still says being recorded: " + " ".join(cat["recording"]))
        # Frames are the recorded ones: the first frames of the same clip at the end.
        for path, (size, sha) in clips(s).items():
            if s is end:
                continue
            if path not in end_clips:
                fail(s, f"{path} is not in the final state")
                continue
            mine, final = decoded[sha]["packets"], decoded[end_clips[path][1]]["packets"]
            if mine != final[: len(mine)]:
                bad = next(i for i in range(len(mine)) if i >= len(final) or mine[i] != final[i])
                fail(s, f"{path}: {len(mine)} frames, not the first frames of its final version ({len(final)} frames): frame {bad} differs")
        # Clips saved before this point are their final bytes.
        for at, path in saved_marks:
            if at < s["at"] or s is end:
                mine = clips(s, readable=False).get(path)
                if mine is None and path in damaged_files(s.get("files_after")):
                    fail(s, f"{path} was saved before this point and was moved aside as damaged")
                elif mine is None:
                    fail(s, f"{path} was saved before this point and is missing")
                elif mine[0] < 0:
                    fail(s, f"{path} was saved before this point and is unreadable")
                elif end_clips.get(path) and mine[1] != end_clips[path][1]:
                    fail(s, f"{path} was saved before this point and is not byte-identical to its final version")

    # Flush states in log order lose nothing; a torn state keeps what its flush state held.
    def compare(base, s, label):
        if "error" in base or "error" in s or base["mount"][0] or s["mount"][0]:
            return
        have = clips(s, readable=False)
        moved = damaged_files(s.get("files_after"))
        for path, (_, sha) in clips(base).items():
            if path not in have and path in moved:
                fail(s, f"{path} was moved aside as damaged: {label} had {frames(sha)} synced frames of it")
            elif path not in have:
                fail(s, f"{path} (in {label}) is gone")
            elif have[path][0] < 0:
                pass  # said above
            elif frames(have[path][1]) < frames(sha):
                fail(s, f"{path}: {frames(have[path][1])} frames, {label} had {frames(sha)}")

    flush_states = sorted((s for s in states if s["id"].startswith("F")), key=lambda s: s["at"]) + ([end] if end else [])
    for a, b in zip(flush_states, flush_states[1:]):
        compare(a, b, a["id"])
    for s in states:
        if s["id"].startswith("T"):
            base = by_id.get("F" + s["id"][1:].split(".")[0])
            if base:
                compare(base, s, base["id"])
    if end:
        for saved in info["saved"]:
            mine = end_clips.get(saved["file"])
            if mine is None:
                fail(end, f"{saved['file']}: logged as saved, not on disk")
            elif frames(mine[1]) != saved["frames"]:
                fail(end, f"{saved['file']}: logged as saved with {saved['frames']} frames, has {frames(mine[1])}")
    else:
        failures["END"] = ["the final state was not tested"]
    return info, states, failures, notes, aside


def recording_file(out, name, base):
    """OUT/<name>/<base>, as the gate has it (plain) or a new recording keeps it (.gz)."""
    for candidate in (base, base + ".gz"):
        path = os.path.join(out, name, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(os.path.join(out, name, base))


def keep_images(out, name, fs, seed, failed_ids, limit):
    """The images of the first `limit` failing states in OUT/<name>/failed/<state>.img.gz."""
    if not failed_ids:
        return []
    kept = []
    where = os.path.join(out, name, "failed")
    os.makedirs(where, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        log = logwrites.Log(logwrites.uncompressed(recording_file(out, name, "log"), tmp))
        base_path = logwrites.uncompressed(recording_file(out, name, "base.img"), tmp)
        for state_id in failed_ids[:limit]:
            image = os.path.join(tmp, "state.img")
            given = os.path.join(out, name, f"{state_id}.img")  # a state the gate keeps as an image
            if os.path.exists(given):
                shutil.copyfile(given, image)
            else:
                logwrites.build(log, base_path, state_id, seed, fs, image)
            with open(image, "rb") as f, gzip.open(os.path.join(where, state_id + ".img.gz"), "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g, 1 << 20)
            kept.append(state_id)
    return kept


def outcome(s, decoded):
    """What a state came to, in words that do not depend on the run: the exit codes and
    the clips left with their frames (sizes and bytes of a repaired clip may carry the
    time of the repair)."""
    parts = [f"fsck={s.get('fsck', [None])[0]}"]
    if "fsck_repair" in s:
        parts.append(f"fsck_repair={s['fsck_repair'][0]}")
    parts.append(f"mount={s.get('mount', [None])[0]}")
    if "repair" in s:
        parts.append(f"repair={s['repair'][0]}")
    if "agent" in s:
        parts.append(f"agent={s['agent'].get('exit')}")
    left = []
    for path, (size, sha) in sorted((s.get("files_after") or {}).items()):
        if path.endswith(".mov") and size >= 0 and sha in decoded:
            left.append(f"{path}:{len(decoded[sha]['packets'])}f")
        elif path.endswith(".mov" + DAMAGED):
            left.append(f"{path}:{size}b")
        elif path.endswith(".mov"):
            left.append(f"{path}:unreadable")
    parts.append("clips=" + (",".join(left) or "none"))
    return " ".join(parts)


def main(argv):
    out = os.path.abspath(argv[0])
    limit = int(argv[argv.index("--keep-images") + 1]) if "--keep-images" in argv else 5
    run = read_json(os.path.join(out, "run.json"))
    gate = run.get("mode") == "gate"
    plan = read_json(os.path.join(out, "plan.json")) if gate else None
    # {directory in OUT: file system}
    recordings = {n: r["fs"] for n, r in plan["recordings"].items()} if gate else run["recordings"]
    seeds = {name: (plan["recordings"][name]["seed"] if gate else run["seed"]) for name in recordings}
    tested = [name for name in recordings if os.path.exists(os.path.join(out, name, "states.jsonl"))]
    shas = set()
    for name in tested:
        for s in read_jsonl(os.path.join(out, name, "states.jsonl")):
            shas.update(v[1] for v in mov_files(s.get("files_after")).values())
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        decoded = dict(zip(sorted(shas), pool.map(lambda sha: decode(os.path.join(out, "clips", sha + ".mov")), sorted(shas))))
    status = 0
    if gate:
        lines = [f"power-cut gate: the listed states of scripts/powercut/states.list ({sum(len(r['states']) for r in plan['recordings'].values())}"
                 f" states of {len(recordings)} recordings), {len(decoded)} distinct clips decoded"]
    else:
        lines = [f"power-cut suite: a new recording, seed {run['seed']} (POWERCUT_SEED={run['seed']} draws the same states from"
                 f" it: scripts/powercut/logwrites.py build), {len(decoded)} distinct clips decoded"]
    listed = {}
    drawn_ids = set()
    to_keep = []
    if gate:
        _, drawn, others = statelist.read_list()
        listed = {(line.recording, line.state): line for line in drawn + others}
        drawn_ids = {(line.recording, line.state) for line in drawn}
    summary = {"mode": run.get("mode"), "recordings": {}}
    verdicts = []
    to_add = []
    for name, fs in recordings.items():
        if name not in tested:
            lines.append(f"{name}: NOT RUN (see the VM's output)")
            summary["recordings"][name] = {"fs": fs, "error": "not run"}
            verdicts.append(f"{name} - NOT RUN")
            status = 1
            continue
        info, states, failures, notes, aside = check_fs(out, name, decoded)
        failed = [s["id"] for s in states if s["id"] in failures] + [i for i in failures if i not in {s["id"] for s in states}]
        damaged = {i for i, n in notes.items() if "fsck" in n}
        torn = sum(1 for s in states if s["id"].startswith("T"))
        flush = sum(1 for s in states if s["id"].startswith("F"))
        moved = sum(len(v) for v in aside.values())
        lines.append(f"{name}: {len(states)} states tested ({flush} flush points, {torn} torn, {len(states) - flush - torn} END), {len(failed)} failed;"
                     f" {info['entries']} log entries, {info['flushes']} flushes, {len(info['saved'])} clips saved while recording,"
                     f" the file system's own check found damage in {len(damaged)} raw states"
                     + (f", {len(damaged & set(failed))} of them failed" if damaged else "")
                     + (f"; {moved} clips moved aside as damaged in {len(aside)} states" if aside else ""))
        for state_id in failed:
            for what in failures[state_id]:
                lines.append(f"  FAIL {name} {state_id}{' (fsck: damaged)' if state_id in damaged else ''}: {what}")
        for state_id, ns in sorted(notes.items()):
            if state_id not in failures:
                continue  # the damage is counted above; shown for the failing states
            for n in ns:
                if n != "fsck":
                    lines.append(f"  note {name} {state_id}: {n}")
        for state_id, paths in sorted(aside.items()):
            if state_id not in failures:
                lines.append(f"  {name} {state_id}: moved aside as damaged (never synced whole): {', '.join(paths)}")
        kept = keep_images(out, name, fs, seeds[name], failed, limit)
        if kept:
            lines.append(f"  images of {', '.join(kept)} in {os.path.join(out, name, 'failed')}/")
        if failed and gate:
            for state_id in failed:
                line = listed.get((name, state_id))
                if line:
                    lines.append(f"  listed: states.list:{line.number}: {line.text()}")
            drawn_failed = [i for i in failed if (name, i) in drawn_ids]
            if drawn_failed:
                to_keep.append((name, drawn_failed))
        elif failed:
            to_add.append((name, failed))
            lines.append(f"  any state again: scripts/powercut/logwrites.py build {out}/{name}/log.gz {out}/{name}/base.img.gz"
                         f" STATE {seeds[name]} {fs} IMAGE")
        for s in sorted(states, key=lambda s: statelist.state_order(s["id"])):
            what = failures.get(s["id"])
            verdicts.append(f"{name} {s['id']} {'FAIL' if what else 'ok'} {outcome(s, decoded)}"
                            + (" | " + " | ".join(" ".join(w.split()) for w in what) if what else ""))
        summary["recordings"][name] = {"fs": fs, "states": len(states), "failed": failed, "failures": failures, "notes": notes,
                                       "moved_aside": aside}
        if failed:
            status = 1
    try:
        times = read_json(os.path.join(out, "vm-times.json"))
        per_fs = []
        for name in tested:
            seconds = [s.get("seconds", 0) for s in read_jsonl(os.path.join(out, name, "states.jsonl"))]
            per_fs.append(f"{name} {sum(seconds):.0f} s ({sum(seconds) / max(1, len(seconds)):.1f} s a state)")
        lines.append(f"time in the VM: {'loading' if gate else 'recording'} {times['record_s']:.0f} s"
                     f"{'' if gate else ' (every file system at once)'}, states {times['states_s']:.0f} s"
                     f" ({times['workers']} workers; " + ", ".join(per_fs) + ")")
    except (OSError, ValueError, KeyError):
        pass
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if to_keep:
        lines.append("states of the draw failed: to keep them (with the states they are judged against) when the fixtures"
                     " are re-recorded, move them out of the drawn block:")
        for name, ids in to_keep:
            lines.append(f"  scripts/powercut/states.py keep {out} {name} {' '.join(ids)}")
    if to_add:
        lines.append("to replay these failing states in every run of the gate (make test-powercut), keep their recordings"
                     " as fixtures and list them:")
        for name, ids in to_add:
            lines.append(f"  scripts/powercut/states.py add {out} {name} {' '.join(ids)}")
        lines.append("  which adds to scripts/powercut/states.list:")
        for name, ids in to_add:
            try:
                _, drawn, others = statelist.read_list()
                listed_now = {(line.recording, line.state) for line in drawn + others}
                for line in statelist.add_lines(out, name, ids, listed_now)[1]:
                    lines.append("    " + line.text())
            except (OSError, ValueError, KeyError, statelist.ListError) as e:
                lines.append(f"    (cannot tell: {e})")
    lines.append("power-cut verdicts: " + ("FAILED" if status else "passed"))
    report = "\n".join(lines)
    print(report)
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write(report + "\n")
    with open(os.path.join(out, "verdicts.txt"), "w") as f:
        f.write("\n".join(verdicts) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
