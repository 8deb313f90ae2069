#!/usr/bin/env bash
# Vigil's motion detector beside Motion 4.5.1 (Debian's `motion`) on the same real footage,
# with its smart mask off and on; prints one table. A measurement a maintainer runs by hand
# (`make compare-motion`), not a test: about 12 minutes, most of it Motion watching in real time.
#
# Footage: tree.avi and vtest.avi from Debian's opencv-doc, cached in
# ~/.cache/vigil-test-footage as the real-footage tests cache them. Scenes, each with a truth:
#   tree          a tree in the wind through a window; no object until a hand comes in front
#                 of the lens at 23.07 s and stays to the end.
#   tree+walker   the same with a dark textured block (a figure) crossing left to right from
#                 12.0 s for 6 s (first pixel in to last pixel out).
#   tree+car      the same with a grey textured block (a car) crossing right to left from
#                 15.0 s for 2 s.
#   vtest         people on a square all the time.
# The objects are painted into the luma by ffmpeg (a texture of ±24 grey levels fixed to the
# block), as Tests/AnalysisTests/RealFootageTests.swift paints them.
#
# Vigil: `vigil analyze --csv` over the scene as Y4M, with motion.dynamic_background true and
# then false (written explicitly, whatever the default); a frame in state `motion` counts.
#
# Motion: it has no offline mode, so it watches each scene in real time, as a camera:
#   - Its input is `netcam_url file://SCENE` with `netcam_params capture_rate=FPS`: Motion's
#     camera thread decodes the file at the scene's frame rate (the notes give the rate it
#     kept, e.g. 14.9 of 15) and its detection loop takes the newest frame at `framerate`
#     (= FPS, rounded: Motion takes whole frames a second), as with a network camera. A file
#     needs no port.
#     An HTTP stream served by `ffmpeg -listen 1` does not work: Motion opens the camera once
#     to probe it and again in its camera thread, and ffmpeg serves one connection. Without
#     capture_rate Motion reads a file at FPS + 1 frames a second.
#   - Motion's detection loop starts 2 s after its camera thread: it asks for a first frame
#     before the thread has opened the camera and sleeps 2 s (motion_init). So the file holds
#     2 s of the scene's first frame before the scene, and the loop starts about at the
#     scene's first frame; its first 2 s + pre_capture + minimum_motion_frames frames
#     (startup_frames) can never be motion: that warm-up is Motion's own and falls in scene
#     time, as Vigil's learning does. Motion takes a snapshot a second (snapshot_interval 1):
#     the first tells where its loop began (the notes give it), and a run whose loop began
#     more than 1 s from the scene's start, or that read the file twice, is done again
#     (twice at most; the notes say so).
#   - Timing is exact to the frame, with no wall clock: each frame carries its number in the
#     chroma (the U plane of the top-left 192×16: 12 bits). Motion detects on the luma alone,
#     and the luma it gets is bit for bit Vigil's Y4M (the file is FFV1, lossless), so the
#     stamp changes nothing it sees. Motion saves every motion frame as a JPEG (`picture_output
#     on`, the changed-pixel count in the name), and the number is read back from each.
#   - Not exact is Motion's own sampling. It runs its detection on one frame in (frames in the
#     last second / 3), 3 a second ("limit the detection rate to 3fps", motion.c), and gives
#     the frames between the last result; which frames those are depends on when it started,
#     so its figures vary between runs: MOTION_RUNS runs (3) of each, the table gives the
#     range. And its detection loop and camera thread each run on their own clocks, so now
#     and then a frame is taken twice and the next never; the notes count both.
#   - The two Motions of a scene (smart mask off and on) run side by side, each with its own
#     reader of the file; Motion needs little CPU at these sizes.
#   - After the scene the file holds 8 s of its last frame: a Motion is stopped as soon as a
#     snapshot shows it past the scene, so no frame of the scene is cut, and it never reaches
#     the end of the file (where it would start again).
#   - Settings: the detection settings of the motion.conf Debian ships (threshold 1500,
#     despeckle_filter EedDl, minimum_motion_frames 1, event_gap 60, pre_capture 3,
#     post_capture 0), Motion's built-in defaults for the rest (noise_tune on, noise_level 32,
#     lightswitch_percent 0, ...); movie output off (it changes no detection, only costs
#     CPU); no web control and no stream port. MOTION_DESPECKLE= (empty) runs Motion's
#     built-in default, no despeckle, instead.
#   - Smart mask: `smart_mask_speed 0` (Motion's default, off) and 5, the start value
#     Motion's documentation recommends (MOTION_SMART_MASK_SPEED to change). Motion tunes the
#     smart mask only outside an event, and an event lasts until event_gap (60 s) passes
#     without motion.
#
# Measure, the same for the four: each motion frame counts 1/FPS s. False motion is motion
# where the truth has no object: 0–10 s, and 10–23.0 s outside the object's crossing. A
# trigger delay is the first motion frame at or after the object's entry minus the entry
# ("missed" if none while it is in view); "*" marks a detector that was already flagging
# motion in the second before the object entered (that delay says nothing about the object).
# Note that tree.avi holds 68 distinct pictures in its 29.9 s (its AVI drops frames): at
# 15 fps most frames repeat the one before, for both detectors alike.
#
# Environment: VIGIL (default .build/release/vigil), MOTION_SMART_MASK_SPEED (5),
# MOTION_DESPECKLE (EedDl), MOTION_RUNS (3), COMPARE_SCENES ("tree walker car vtest"),
# COMPARE_KEEP=1 keeps the temporary directory (inputs, configurations, logs, Motion's
# pictures). Installs Motion with apt-get when it is missing (with sudo when not root) and
# leaves its system service disabled and stopped.
set -euo pipefail

VIGIL=${VIGIL:-.build/release/vigil}
SMART_SPEED=${MOTION_SMART_MASK_SPEED:-5}
DESPECKLE=${MOTION_DESPECKLE-EedDl}
SCENES=${COMPARE_SCENES:-tree walker car vtest}
RUNS=${MOTION_RUNS:-3}
FOOTAGE=$HOME/.cache/vigil-test-footage
DATA=usr/share/doc/opencv-doc/examples/data
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

# shellcheck source=scripts/apt-install.sh
. "$(dirname "$0")/apt-install.sh"

log() { printf '%s\n' "$*" >&2; }
die() {
    log "compare-motion: $*"
    exit 1
}

for tool in ffmpeg ffprobe awk od; do
    command -v "$tool" >/dev/null || die "$tool is missing (make deps installs ffmpeg)"
done
[ -x "$VIGIL" ] || die "no vigil binary at $VIGIL (build it: swift build -c release, or set VIGIL=)"

# --- Motion -------------------------------------------------------------------------------
if ! command -v motion >/dev/null; then
    log "installing Motion: apt-get install motion"
    apt_install motion || die "apt-get install motion failed"
    # The package enables motion.service and, under systemd, starts it: a daemon on
    # /dev/video0 with ports 8080 and 8081 is not what was asked for.
    if [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now motion.service >&2 || log "warning: could not stop motion.service"
    fi
fi
MOTION_VERSION=$({ motion -h 2>&1 || true; } | sed -n 's/.*Version \([0-9.]*\).*/\1/p' | head -n 1)
[ "$MOTION_VERSION" = 4.5.1 ] || log "warning: Motion $MOTION_VERSION is installed, not 4.5.1"
OTHER_MOTION=
if [ -d /run/systemd/system ] && systemctl is-active --quiet motion.service 2>/dev/null; then
    OTHER_MOTION="motion.service is running beside this measurement and competes for the CPU"
    log "warning: $OTHER_MOTION"
fi

# --- footage ------------------------------------------------------------------------------
if [ ! -f "$FOOTAGE/$DATA/tree.avi" ] || [ ! -f "$FOOTAGE/$DATA/vtest.avi" ]; then
    log "fetching the footage: apt-get download opencv-doc (96 MB, once) into $FOOTAGE"
    mkdir -p "$FOOTAGE"
    (cd "$FOOTAGE" && { compgen -G 'opencv-doc_*.deb' >/dev/null || apt-get download -q opencv-doc >&2; })
    deb=$(compgen -G "$FOOTAGE/opencv-doc_*.deb" | sort | tail -n 1)
    [ -n "$deb" ] || die "apt-get download opencv-doc fetched nothing"
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$FOOTAGE" "./$DATA/tree.avi" "./$DATA/vtest.avi"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/compare-motion.XXXXXX")
declare -a MOTION_PIDS=() # the Motions running, by their process ids
cleanup() {
    local pid
    for pid in "${MOTION_PIDS[@]}"; do
        [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    done
    if [ -n "${COMPARE_KEEP:-}" ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- scenes -------------------------------------------------------------------------------
# Per source: frames, rate as num/den and rounded, size.
declare -A NFRAMES FPS_NUM FPS_DEN FPS WIDTH HEIGHT

to_y4m() { # SOURCE: the .avi as Y4M, as the tests convert it
    local src=$1
    [ -f "$TMP/$src.y4m" ] && return
    ffmpeg -nostdin -v error -y -i "$FOOTAGE/$DATA/$src.avi" -pix_fmt yuv420p -f yuv4mpegpipe "$TMP/$src.y4m"
    local header rate
    header=$(head -c 200 "$TMP/$src.y4m" | head -n 1)
    WIDTH[$src]=$(sed -n 's/.* W\([0-9]*\).*/\1/p' <<<"$header")
    HEIGHT[$src]=$(sed -n 's/.* H\([0-9]*\).*/\1/p' <<<"$header")
    rate=$(sed -n 's/.* F\([0-9]*:[0-9]*\).*/\1/p' <<<"$header")
    FPS_NUM[$src]=${rate%:*}
    FPS_DEN[$src]=${rate#*:}
    FPS[$src]=$(((FPS_NUM[$src] + FPS_DEN[$src] / 2) / FPS_DEN[$src])) # Motion takes whole frames a second
    local frame_bytes=$((WIDTH[$src] * HEIGHT[$src] * 3 / 2 + 6)) size
    size=$(stat -c %s "$TMP/$src.y4m")
    NFRAMES[$src]=$(((size - ${#header} - 1) / frame_bytes))
}

# Paints a textured block crossing the picture: NAME LEVEL WIDTH HEIGHT TOP ENTER SECONDS DIR
# (sizes as fractions of the picture, DIR ltr or rtl), into SCENE.y4m from SOURCE.y4m.
paint() {
    local src=$1 scene=$2 level=$3 fw=$4 fh=$5 ftop=$6 enter=$7 secs=$8 dir=$9
    local w=${WIDTH[$src]} h=${HEIGHT[$src]} ow oh top x hash
    ow=$(awk -v w="$w" -v f="$fw" 'BEGIN { print int(w * f) }')
    oh=$(awk -v h="$h" -v f="$fh" 'BEGIN { print int(h * f) }')
    top=$(awk -v h="$h" -v f="$ftop" 'BEGIN { print int(h * f) }')
    # Travelled = the share of (width + block) crossed; the block's first pixel enters at ENTER
    # and its last leaves at ENTER + SECONDS.
    if [ "$dir" = ltr ]; then
        x="trunc((t-$enter)/$secs*(W+w))-w"
    else
        x="W-trunc((t-$enter)/$secs*(W+w))"
    fi
    # A fixed pseudo-random texture of ±24 levels (one frame, repeated: it moves with the block).
    hash="(sin(X*12.9898+Y*78.233)*43758.5453)"
    ffmpeg -nostdin -v error -y -i "$TMP/$src.y4m" -filter_complex "
        color=c=black:s=${ow}x${oh}:d=1,trim=end_frame=1,format=yuv420p,
        geq=lum='$level-24+floor(49*($hash-floor($hash)))':cb=128:cr=128[block];
        [0:v][block]overlay=x='$x':y=$top:enable='between(t,$enter,$enter+$secs)':eof_action=repeat:format=yuv420" \
        -pix_fmt yuv420p -f yuv4mpegpipe "$TMP/$scene.y4m"
}

# Motion's input: SCENE.y4m with 2 s of its first frame before it (Motion's detection loop
# sleeps 2 s before it starts, see the top) and 8 s of its last frame after it, each frame's
# number in the U plane of the top-left 192×16 (12 cells of 16×16, U 192 for a 1, 64 for a 0),
# counted from the first of the 2 s; luma untouched; lossless FFV1.
motion_input() { # SRC SCENE
    local fps=${FPS[$1]}
    ffmpeg -nostdin -v error -y -i "$TMP/$2.y4m" -filter_complex "
        [0:v]tpad=start_mode=clone:start=$((2 * fps)):stop_mode=clone:stop=$((8 * fps)),
        extractplanes=y+u+v[y][u][v];
        [u]geq=lum='if(lt(Y,8)*lt(X,96),64+128*mod(floor(N/pow(2,floor(X/8))),2),p(X,Y))'[stamped];
        [y][stamped][v]mergeplanes=0x001020:yuv420p" \
        -c:v ffv1 -f nut "$TMP/$2.motion.nut"
}

# The frame numbers stamped in the JPEGs given, one a line, in the order given.
read_stamps() {
    [ $# -gt 0 ] || return 0
    local list f
    list=$(mktemp "$TMP/stamps.XXXXXX")
    for f in "$@"; do printf "file '%s'\n" "$f" >>"$list"; done
    ffmpeg -nostdin -v error -f concat -safe 0 -i "$list" \
        -vf "crop=192:16:0:0,extractplanes=u,scale=12:1:flags=area" -f rawvideo -pix_fmt gray - |
        od -An -v -tu1 -w12 |
        awk '{ n = 0; for (i = NF; i >= 1; i--) n = n * 2 + ($i > 128); print n }'
    rm -f "$list"
}

# --- Vigil --------------------------------------------------------------------------------
run_vigil() { # SRC SCENE true|false OUT: OUT.frames gets the motion frames' numbers
    local src=$1 scene=$2 model=$3 out=$4
    mkdir -p "$TMP/store"
    cat >"$out.conf" <<EOF
camera = { device = "synthetic"; };
storage = { path = "$TMP/store"; };
motion = { dynamic_background = $model; };
EOF
    "$VIGIL" analyze --config "$out.conf" --source "file:$TMP/$scene.y4m" --csv "$out.csv" >"$out.json" ||
        die "vigil analyze failed on $scene (see above)"
    awk -F, -v num="${FPS_NUM[$src]}" -v den="${FPS_DEN[$src]}" \
        'NR > 1 && $4 == "motion" { printf "%d\n", $1 * num / den + 0.5 }' "$out.csv" >"$out.frames"
}

# --- Motion -------------------------------------------------------------------------------
motion_start() { # SRC SCENE SPEED OUT: starts Motion on SCENE; its pid goes to MOTION_PIDS
    local src=$1 scene=$2 speed=$3 out=$4
    local fps=${FPS[$src]}
    mkdir -p "$out.pics"
    {
        echo "daemon off"
        echo "setup_mode off"
        echo "log_level 6"
        echo "log_file $out.log"
        echo "target_dir $out.pics"
        echo "netcam_url file://$TMP/$scene.motion.nut"
        echo "netcam_params capture_rate=$fps"
        echo "width ${WIDTH[$src]}"
        echo "height ${HEIGHT[$src]}"
        echo "framerate $fps"
        echo "threshold 1500"
        [ -z "$DESPECKLE" ] || echo "despeckle_filter $DESPECKLE"
        echo "minimum_motion_frames 1"
        echo "event_gap 60"
        echo "pre_capture 3"
        echo "post_capture 0"
        echo "smart_mask_speed $speed"
        echo "picture_output on"
        echo "picture_filename %Y%m%d%H%M%S-%q-%D-%o"
        # A frame a second, motion or not: where Motion is in the scene.
        echo "snapshot_interval 1"
        echo "snapshot_filename snap/%Y%m%d%H%M%S-%q"
        echo "movie_output off"
        echo "webcontrol_port 0"
        echo "stream_port 0"
        # One line per motion frame, keyed by its time and shot as the picture names are.
        echo "on_motion_detected /bin/sh -c 'echo %Y%m%d%H%M%S-%q >>$out.hook'"
    } >"$out.conf"
    : >"$out.hook"
    motion -n -c "$out.conf" >"$out.stdout" 2>&1 &
    MOTION_PIDS+=("$!")
}

# The pictures (JPEG files) in DIR, in the order Motion wrote them (their names can be out of
# order: a frame may get the next second's time and the shot number of the one before).
saved_in_order() { # DIR
    find "$1" -maxdepth 1 -type f -name '*.jpg' -printf '%T@ %f\n' | sort -n -k 1,1 | cut -d ' ' -f 2
}

# Waits until every Motion started has taken a snapshot numbered past the scene (in the
# frames after it), stopping each as it does.
motion_wait() { # SRC OUT...
    local src=$1
    shift
    local n=${NFRAMES[$src]} fps=${FPS[$src]}
    local budget=$((n / fps + 60)) started=$SECONDS i out last stamp running
    sleep $((n / fps))
    while :; do
        running=0
        for i in "${!MOTION_PIDS[@]}"; do
            [ -n "${MOTION_PIDS[$i]}" ] || continue
            out=${*:$((i + 1)):1}
            kill -0 "${MOTION_PIDS[$i]}" 2>/dev/null ||
                die "Motion stopped early; the end of its log $out.log: $(tail -n 3 "$out.log" 2>/dev/null)"
            stamp=-1
            last=$(saved_in_order "$out.pics/snap" 2>/dev/null | tail -n 1) || true
            [ -z "$last" ] || stamp=$(read_stamps "$out.pics/snap/$last")
            if [ $((stamp - 2 * fps)) -ge "$n" ]; then
                kill -TERM "${MOTION_PIDS[$i]}"
                wait "${MOTION_PIDS[$i]}" 2>/dev/null || true
                MOTION_PIDS[i]=
            else
                running=1
            fi
        done
        [ "$running" = 1 ] || break
        [ $((SECONDS - started)) -lt "$budget" ] ||
            die "Motion did not reach the end of the scene in ${budget}s (COMPARE_KEEP=1 keeps $TMP)"
        sleep 0.5
    done
    MOTION_PIDS=()
    sleep 0.3 # the shells of the last on_motion_detected
}

# After Motion: OUT.frames gets the scene's motion frames (numbered from the scene's first),
# OUT.notes "saved signalled unsaved repeated holes back first rate": motion frames saved,
# motion frames signalled (on_motion_detected), signalled but not saved, saved twice, one-frame
# holes inside motion, times the numbers went back by a second or more (Motion started the
# file again), the frame of its first snapshot (where its detection loop was in its first
# second; negative: in the 2 s before the scene), the frames a second its camera thread read.
# Pictures of motion frames only: a name's changed pixels above its threshold (pre_capture
# frames are saved too, with their own counts).
motion_collect() { # SRC OUT
    local src=$1 out=$2 n=${NFRAMES[$1]}
    local -a names=() snaps=()
    mapfile -t names < <(saved_in_order "$out.pics" |
        awk -F- '{ name = $0; sub(/\.jpg$/, "", $4); if ($3 + 0 > $4 + 0) print name }')
    mapfile -t snaps < <(saved_in_order "$out.pics/snap")
    : >"$out.saved"
    if [ ${#names[@]} -gt 0 ]; then
        read_stamps "${names[@]/#/$out.pics/}" | paste -d ' ' <(printf '%s\n' "${names[@]}") - >"$out.saved"
    fi
    read_stamps "${snaps[@]/#/$out.pics/snap/}" | paste -d ' ' <(printf '%s\n' "${snaps[@]}") - >"$out.snaps"
    : >"$out.frames"
    local fps=${FPS[$src]}
    awk -v n="$n" -v fps="$fps" -v pre="$((2 * fps))" -v frames="$out.frames" '
        FILENAME ~ /\.snaps$/ {
            $2 -= pre; split($1, p, "[-.]"); key = p[1] "-" p[2]
            if (FNR == 1) first = $2
            if ($2 < n) { snaps++; last = $2 }
            if ($2 >= n && (tail == "" || key < tail)) tail = key
            next
        }
        FILENAME ~ /\.saved$/ {
            $2 -= pre; split($1, p, "-"); key = p[1] "-" p[2]; saved[key] = 1
            if ($2 < 0) next
            if ($2 >= n) { if (tail == "" || key < tail) tail = key; next }
            if (count++ && $2 < prev - fps) back++ # a second back or more: not a jitter
            prev = $2
            if ($2 in seen) rep++; else { seen[$2] = 1; print $2 > frames }
            next
        }
        tail == "" || $1 < tail { signalled++; if (!($1 in saved)) unsaved++ }
        END {
            close(frames)
            for (f in seen) if (!((f + 1) in seen) && ((f + 2) in seen)) holes++
            printf "%d %d %d %d %d %d %d %.1f\n", count, signalled, unsaved, rep, holes, back, first, (snaps > 1 ? (last - first) / (snaps - 1) : 0)
        }' "$out.snaps" "$out.saved" "$out.hook" >"$out.notes"
}

# What makes a Motion run not a fair one, or nothing: it started the file again, or its
# detection began more than 1 s after the scene's start (its first snapshot, taken in its
# first second, more than 2 s into the scene) or before (that snapshot before -1 s).
motion_problem() { # SRC OUT
    local fps=${FPS[$1]} back first
    read -r _ _ _ _ _ back first _ <"$2.notes"
    if [ "$back" != 0 ]; then
        echo "it started the file again"
    elif [ "$first" -gt $((2 * fps)) ]; then
        echo "its detection began $(awk -v f="$first" -v r="$fps" 'BEGIN { printf "%.1f", f / r - 1 }') s or more into the scene"
    elif [ "$first" -lt "-$fps" ]; then
        echo "its detection began $(awk -v f="$first" -v r="$fps" 'BEGIN { printf "%.1f", -f / r }') s or more before the scene"
    fi
}

# MOTION_RUNS runs of Motion with the smart mask off and on, side by side; a run that was not
# fair is done again (twice at most), alone.
motion_runs() { # SRC SCENE TITLE OBJECTS
    local src=$1 scene=$2 title=$3 objects=$4 run attempt i out det problem
    local secs signalled unsaved rep holes first rate
    local -a todo outs again
    secs=$(awk -v n="${NFRAMES[$src]}" -v a="${FPS_NUM[$src]}" -v b="${FPS_DEN[$src]}" 'BEGIN { printf "%.1f", n * b / a }')
    for run in $(seq 1 "$RUNS"); do
        todo=(0 "$SMART_SPEED")
        attempt=1
        while [ ${#todo[@]} -gt 0 ]; do
            log "== $title: Motion, smart mask ${todo[*]}, ${secs} s in real time (run $run of $RUNS$([ "$attempt" = 1 ] || echo ", again"))"
            outs=()
            for i in "${!todo[@]}"; do
                outs+=("$TMP/$scene.motion-${todo[$i]}.$run.$attempt")
                motion_start "$src" "$scene" "${todo[$i]}" "${outs[$i]}"
            done
            motion_wait "$src" "${outs[@]}"
            again=()
            for i in "${!todo[@]}"; do
                out=${outs[$i]}
                det="Motion"
                [ "${todo[$i]}" = 0 ] || det="Motion, smart mask ${todo[$i]}"
                motion_collect "$src" "$out"
                problem=$(motion_problem "$src" "$out")
                if [ -n "$problem" ] && [ "$attempt" -lt 3 ]; then
                    echo "again|$title, $det, run $run: $problem" >>"$NOTES"
                    again+=("${todo[$i]}")
                    continue
                fi
                echo "$title|$det|$src|$(measure "$out.frames" "$src" "$objects")" >>"$RESULTS"
                read -r _ signalled unsaved rep holes _ first rate <"$out.notes"
                echo "run|$title, $det, run $run|$src|${FPS[$src]}|$first|$rate|$rep|$holes|$unsaved|$signalled|$problem" >>"$NOTES"
            done
            todo=("${again[@]}")
            attempt=$((attempt + 1))
        done
    done
}

# --- measures -----------------------------------------------------------------------------
# One run's figures from FRAMES (motion frame numbers), as "f0|f1|w1|share|first|objects":
# false motion before 10 s and from 10 to 23 s outside the objects (seconds), the seconds
# that leaves from 10 to 23 s, the share of the clip flagged (%), the first motion (s), and
# per object "name=delay" (s, "*" after it when motion was flagged in the second before
# the entry) or "name=missed", joined by ";".
measure() { # FRAMES SRC OBJECTS ("name:enter:exit;...", exit "end" for the clip's end)
    awk -v num="${FPS_NUM[$2]}" -v den="${FPS_DEN[$2]}" -v n="${NFRAMES[$2]}" -v objects="$3" '
        { motion[$1] = 1; count++ }
        END {
            fps = num / den; k = split(objects, obj, ";")
            for (i = 1; i <= k; i++) {
                split(obj[i], p, ":"); name[i] = p[1]; enter[i] = p[2]; leave[i] = p[3] == "end" ? n / fps : p[3]
            }
            window1 = 13
            for (i = 1; i <= k; i++) { # the crossings inside 10–23 s are not "nothing"
                lo = enter[i] > 10 ? enter[i] : 10; hi = leave[i] < 23 ? leave[i] : 23
                if (hi > lo) window1 -= hi - lo
            }
            first = -1
            for (f = 0; f < n; f++) {
                if (!(f in motion)) continue
                t = f / fps
                if (first < 0) first = t
                inobj = 0
                for (i = 1; i <= k; i++) if (t >= enter[i] && t < leave[i]) inobj = 1
                if (inobj) continue
                if (t < 10) false0++; else if (t < 23) false1++
            }
            objs = ""
            for (i = 1; i <= k; i++) {
                hit = -1; before = 0
                for (f = 0; f < n; f++) {
                    if (!(f in motion)) continue
                    t = f / fps
                    if (t >= enter[i] - 1 && t < enter[i] - 1e-6) before = 1
                    if (hit < 0 && t >= enter[i] - 1e-6 && t <= leave[i]) hit = t - enter[i]
                }
                objs = objs (i > 1 ? ";" : "") name[i] "=" (hit < 0 ? "missed" : sprintf("%.2f%s", hit < 0.005 ? 0 : hit, before ? "*" : ""))
            }
            printf "%.2f|%.2f|%.1f|%.1f|%.2f|%s\n", false0 / fps, false1 / fps, window1, 100 * count / n, first, objs
        }' "$1"
}

# --- run ----------------------------------------------------------------------------------
RESULTS=$TMP/results # "scene|detector|source|" + a measure line, one per run
NOTES=$TMP/notes # per Motion run: "run|what|source|fps|first|rate|twice|holes|unsaved|signalled|problem",
# per run done again: "again|what: why"
: >"$RESULTS"
: >"$NOTES"

for scene in $SCENES; do
    case $scene in
        tree) src=tree objects="hand:23.07:end" title=tree ;;
        walker) src=tree objects="walker:12.0:18.0;hand:23.07:end" title=tree+walker ;;
        car) src=tree objects="car:15.0:17.0;hand:23.07:end" title=tree+car ;;
        vtest) src=vtest objects="" title=vtest ;;
        *) die "unknown scene $scene (tree, walker, car, vtest)" ;;
    esac
    log "== $title: composing"
    to_y4m "$src"
    case $scene in
        walker) paint tree walker 50 0.075 0.30 0.40 12.0 6 ltr ;;
        car) paint tree car 110 0.35 0.18 0.62 15.0 2 rtl ;;
        *) ;; # the footage as it is, $TMP/$src.y4m
    esac
    motion_input "$src" "$scene"

    for model in true false; do
        out=$TMP/$scene.vigil-$model
        run_vigil "$src" "$scene" "$model" "$out"
        det="Vigil, model on"
        [ "$model" = true ] || det="Vigil, model off"
        echo "$title|$det|$src|$(measure "$out.frames" "$src" "$objects")" >>"$RESULTS"
    done

    motion_runs "$src" "$scene" "$title" "$objects"
done

# --- table and summary --------------------------------------------------------------------
vigil_version=$("$VIGIL" --version 2>/dev/null | awk '{ print $2 }') || true
cat <<EOF

Vigil ${vigil_version:-?} ($VIGIL) beside Motion $MOTION_VERSION on the same frames. Every figure counts motion frames,
each 1/fps s. Motion: threshold 1500, despeckle_filter ${DESPECKLE:-none}, event_gap 60, pre_capture 3 (Debian's
motion.conf), noise_tune on, smart mask off (its default) and $SMART_SPEED (the start value its documentation
recommends). Motion watched each scene in real time from a file (netcam_url file://, capture_rate = the scene's
rate); its frames are identified by a number stamped in their chroma, exact to the frame. Motion runs its
detection on about 3 frames a second and its figures vary between runs: they are the range over $RUNS run$([ "$RUNS" = 1 ] || echo s).

EOF
awk -F'|' '
    function range(lo, hi, d,   a, b) {
        a = sprintf("%." d "f", lo); b = sprintf("%." d "f", hi)
        return a == b ? a : a "-" b
    }
    function lo(k, v) { if (!((k) in LO) || v < LO[k]) LO[k] = v }
    function hi(k, v) { if (!((k) in HI) || v > HI[k]) HI[k] = v }
    function both(k, v) { lo(k, v); hi(k, v) }
    {
        row = $1 SUBSEP $2
        if (!(row in RUNS)) { ROWS[++nrows] = row; SCENE[row] = $1; DET[row] = $2; SRC[row] = $3 }
        if (!($2 in DETSEEN)) { DETSEEN[$2] = 1; DETS[++ndets] = $2 }
        RUNS[row]++
        both(row SUBSEP "f0", $4); both(row SUBSEP "f1", $5); W1[row] = $6
        both(row SUBSEP "share", $7); both(row SUBSEP "first", $8)
        k = split($9, o, ";")
        NOBJ[row] = k
        for (i = 1; i <= k; i++) {
            split(o[i], p, "="); ob = row SUBSEP i; ONAME[ob] = p[1]
            if (p[2] == "missed") { MISSED[ob]++; continue }
            if (p[2] ~ /\*/) STAR[ob] = 1
            d = p[2]; sub(/\*/, "", d); both(ob, d + 0)
        }
    }
    END {
        fmt = "%-12s %-22s %-10s %-16s %-48s %s\n"
        printf fmt, "scene", "detector", "false 0-10", "false 10-23", "objects: trigger delay", "flagged"
        printf fmt, "------------", "----------------------", "----------", "----------------", "------------------------------------------------", "-----------------------"
        for (r = 1; r <= nrows; r++) {
            row = ROWS[r]
            share = range(LO[row SUBSEP "share"], HI[row SUBSEP "share"], 1) " %"
            if (SRC[row] == "vtest") {
                first = HI[row SUBSEP "first"] < 0 ? "" : ", first at " range(LO[row SUBSEP "first"], HI[row SUBSEP "first"], 2) " s"
                printf fmt, SCENE[row], DET[row], "-", "-", "-", share " of the clip" first
                continue
            }
            objs = ""
            for (i = 1; i <= NOBJ[row]; i++) {
                ob = row SUBSEP i; s = ONAME[ob]
                if (MISSED[ob] == RUNS[row]) s = s " missed"
                else {
                    s = s " +" range(LO[ob], HI[ob], 2) " s" (STAR[ob] ? "*" : "")
                    if (MISSED[ob]) s = s " (missed " MISSED[ob] "/" RUNS[row] ")"
                }
                objs = objs (i > 1 ? ", " : "") s
            }
            printf fmt, SCENE[row], DET[row], range(LO[row SUBSEP "f0"], HI[row SUBSEP "f0"], 2) " s", \
                range(LO[row SUBSEP "f1"], HI[row SUBSEP "f1"], 2) " / " sprintf("%.1f", W1[row]) " s", objs, share
        }
        print ""
        print "false 0-10: motion seconds in the first 10 s (all learning and warm-up included)."
        print "false 10-23: motion seconds from 10 s to 23.0 s outside the object crossing / the seconds that leaves."
        print "objects: first motion frame at or after the entry minus the entry; \"*\": already flagging motion in"
        print "the second before the entry, so the delay says nothing about the object."
        print ""
        print "Summary (tree scenes added up; a range is the best and the worst run of each scene added up):"
        for (d = 1; d <= ndets; d++) {
            det = DETS[d]; f0lo = f0hi = f1lo = f1hi = w1 = n0 = objs = found = early = maxruns = 0; worst = -1; slowest = vt = sometimes = ""
            for (r = 1; r <= nrows; r++) {
                row = ROWS[r]
                if (DET[row] != det) continue
                if (RUNS[row] > maxruns) maxruns = RUNS[row]
                if (SRC[row] == "vtest") { vt = "vtest flagged " range(LO[row SUBSEP "share"], HI[row SUBSEP "share"], 1) " %"; continue }
                f0lo += LO[row SUBSEP "f0"]; f0hi += HI[row SUBSEP "f0"]
                f1lo += LO[row SUBSEP "f1"]; f1hi += HI[row SUBSEP "f1"]; w1 += W1[row]; n0 += 10
                for (i = 1; i <= NOBJ[row]; i++) {
                    ob = row SUBSEP i; objs++
                    if (MISSED[ob] == RUNS[row]) continue
                    if (MISSED[ob]) sometimes = sometimes sprintf(", %s missed in %d of %d runs of %s", ONAME[ob], MISSED[ob], RUNS[row], SCENE[row])
                    else found++
                    if (STAR[ob]) early++
                    else if (HI[ob] > worst) { worst = HI[ob]; slowest = ONAME[ob] }
                }
            }
            s = sprintf("  %-24s", det ":")
            if (n0) s = s sprintf(" false motion %s s of %d s before 10 s, %s s of %.1f s from 10 to 23 s;", range(f0lo, f0hi, 2), n0, range(f1lo, f1hi, 2), w1)
            if (objs) s = s sprintf(" %d of %d objects detected%s", found, objs, maxruns > 1 ? " in every run" : "") sometimes (early ? sprintf(" (%d while already in motion)", early) : "") (worst >= 0 ? sprintf(", slowest clean trigger +%.2f s (%s)", worst, slowest) : "") ";"
            if (vt != "") s = s " " vt
            sub(/;$/, "", s)
            print s
        }
    }' "$RESULTS"
if [ -s "$NOTES" ]; then
    awk -F'|' -v runs="$RUNS" '
        function range(lo, hi) { return lo == hi ? lo : lo "-" hi }
        function both(k, v) {
            if (!(k in LO) || v + 0 < LO[k] + 0) LO[k] = v
            if (!(k in HI) || v + 0 > HI[k] + 0) HI[k] = v
        }
        $1 == "again" { again = again "\n    " $2; next }
        {
            n++; both("first", $5); both("twice", $7); both("holes", $8)
            if (!($3 in FPS)) { FPS[$3] = $4; SRCS[++nsrc] = $3 }
            both("rate" $3, $6)
            unsaved += $9; signalled += $10
            if ($11 != "") unfair = unfair "\n    " $2 ": " $11
        }
        END {
            printf "\nMotion'"'"'s sampling, over its %d runs (%d of each detector and scene, side by side):\n", n, runs
            printf "  detection began at frame %s of the scene (its first snapshot, in its first second)\n", range(LO["first"], HI["first"])
            s = ""
            for (i = 1; i <= nsrc; i++) s = s (i > 1 ? ", " : "") range(LO["rate" SRCS[i]], HI["rate" SRCS[i]]) " of " SRCS[i] "'"'"'s " FPS[SRCS[i]]
            printf "  its camera thread read %s frames a second\n", s
            printf "  frames analysed twice, a run: %s; one-frame holes inside motion, a run: %s\n", range(LO["twice"], HI["twice"]), range(LO["holes"], HI["holes"])
            printf "  motion frames Motion signalled (on_motion_detected) but did not save, so not counted: %d of %d\n", unsaved, signalled
            if (again != "") printf "  runs done again:%s\n", again
            if (unfair != "") printf "  NOT FAIR, kept after three tries:%s\n", unfair
        }' "$NOTES"
fi
[ -z "$OTHER_MOTION" ] || printf '\nNote: %s.\n' "$OTHER_MOTION"
