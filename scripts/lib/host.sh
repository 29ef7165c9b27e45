# host_line: one line naming the machine a bench ran on, printed first by
# every bench script, so a figure copied into docs/benchmarks.md keeps its
# host kind: CPU model (family/model), CPUs, each cache level as sysfs
# documents it, load average, UTC date and time.
host_line() {
  local model family cpu_model caches="" idx level type size
  model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | xargs)
  family=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)
  cpu_model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | xargs)
  for idx in /sys/devices/system/cpu/cpu0/cache/index*; do
    [ -r "$idx/level" ] || continue
    level=$(cat "$idx/level")
    type=$(cat "$idx/type")
    size=$(cat "$idx/size")
    case "$type" in
      Instruction) continue ;;
      Data) caches+=" L${level}d $size" ;;
      *) caches+=" L${level} $size" ;;
    esac
  done
  echo "host: ${model:-unknown CPU} (family ${family:-?} model ${cpu_model:-?}), $(nproc) CPU(s);${caches:- caches not in sysfs} (sysfs); load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%F %H:%M UTC')"
}
