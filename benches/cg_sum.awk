# Sums a callgrind output file (positions "line", one event, Ir) for
# igb_instr.sh, in the guest (busybox awk) or on the host.
#   awk -v MODE=ob -v RE=<object regex> -f cg_sum.awk FILE
#     the self cost of every object matching RE (a library without symbols
#     is counted whole), then "calls N FN" for each function in a matching
#     object called from outside them (the PMD's burst functions);
#   awk -v MODE=fn -v RE=<function regex> -f cg_sum.awk FILE
#     the inclusive cost of the functions matching RE (their own cost and
#     that of every call they make; they must not call each other), then
#     "calls N FN" for each.
# Cost lines belong to the last "fn=" (in the last "ob="); the line after
# "calls=" is that call's inclusive cost, charged to the calling function
# in fn mode and skipped in ob mode. Names may be compressed: "(n) name"
# defines n, "(n)" refers to it; ob/cob share one space, fn/cfn another.
function name(kind, s,   id) {
    if (match(s, /^\([0-9]+\)/)) {
        id = substr(s, 2, RLENGTH - 2)
        if (length(s) > RLENGTH) names[kind, id] = substr(s, RLENGTH + 2)
        return names[kind, id]
    }
    return s
}
/^ob=/ { ob = name("o", substr($0, 4)); next }
/^cob=/ { cob = name("o", substr($0, 5)); next }
/^fn=/ { fn = name("f", substr($0, 4)); cob = ob; next }
/^cfn=/ { cfn = name("f", substr($0, 5)); next }
/^calls=/ {
    split(substr($0, 7), c, " ")
    if (MODE == "ob" && cob ~ RE && ob !~ RE) calls[cfn] += c[1]
    if (MODE == "fn" && cfn ~ RE) calls[cfn] += c[1]
    call = 1
    next
}
/^[0-9+*-]/ {
    if (call) {
        call = 0
        if (MODE == "fn" && fn ~ RE) sum += $2
        next
    }
    if ((MODE == "ob" && ob ~ RE) || (MODE == "fn" && fn ~ RE)) sum += $2
    next
}
END {
    printf "%.0f\n", sum
    for (f in calls) printf "calls %.0f %s\n", calls[f], f
}
