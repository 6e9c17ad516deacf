# Sourced by the set-up scripts: say a line at least every HEARTBEAT_S seconds while a long step runs, so that the
# main job is never silent for 30 s (a pip install of the serving stack takes minutes and prints nothing).
# heartbeat LABEL PID...: one line "LABEL: still working (N s)" every HEARTBEAT_S s until every PID has exited.
HEARTBEAT_S=${HEARTBEAT_S:-20}
heartbeat() {
  local label=$1 start=$SECONDS next=$((SECONDS + HEARTBEAT_S)) pid running
  shift
  while :; do
    running=0
    for pid in "$@"; do kill -0 "$pid" 2> /dev/null && running=1; done
    [ "$running" = 1 ] || return 0
    if [ "$SECONDS" -ge "$next" ]; then
      echo "$label: still working ($((SECONDS - start)) s)"
      next=$((SECONDS + HEARTBEAT_S))
    fi
    sleep 1
  done
}
