#!/bin/sh
# Runs in each of vhost-guest.sh's two guests (as /rpmd/guest-test.sh).
# eth0 is a virtio-net-pci on a vhost-user netdev served by rpmd's
# vswitch. The kernel command line names this guest's role (rpmd.role=a
# or b); a is 10.0.0.1, b is 10.0.0.2. Each guest serves /rpmd/data over
# HTTP (busybox httpd), pings the other, fetches the other's copy and
# checks its bytes against the digest the host computed, then waits until
# the other has done the same. One "@@RPMD check NAME ok|FAIL" line per
# check; exit status 0 only if every check passed.
role=$(sed -n 's/.*rpmd\.role=\([ab]\).*/\1/p' /proc/cmdline)
case "$role" in
    a) me=10.0.0.1; peer=10.0.0.2 ;;
    b) me=10.0.0.2; peer=10.0.0.1 ;;
    *) echo "@@RPMD check role FAIL (no rpmd.role= on the command line)"; exit 1 ;;
esac
fails=0
check() {   # check NAME COMMAND...
    name=$1; shift
    if "$@"; then echo "@@RPMD check $name ok"; else echo "@@RPMD check $name FAIL"; fails=$((fails + 1)); fi
}
S=/sys/class/net/eth0/statistics
counters() { echo "@@RPMD eth0 $1: rx_packets=$(cat $S/rx_packets) tx_packets=$(cat $S/tx_packets) rx_bytes=$(cat $S/rx_bytes) tx_bytes=$(cat $S/tx_bytes)"; }
echo "@@RPMD role=$role driver=$(basename "$(readlink /sys/class/net/eth0/device/driver)") features=$(cat /sys/class/net/eth0/device/features 2>/dev/null)"
ip link set lo up
ip link set eth0 up && ip addr add $me/24 dev eth0 || { echo "@@RPMD check eth0 FAIL"; exit 1; }
mkdir -p /www && cp /rpmd/data /www/data
httpd -p 80 -h /www

# The other guest may still be booting: wait up to 90 s for its first reply.
up() {
    i=0
    while [ $i -lt 90 ]; do
        ping -c 1 -W 1 $peer >/dev/null 2>&1 && return 0
        i=$((i + 1))
    done
    return 1
}
check reach up
counters "after reach"
check ping ping -c 5 -W 2 $peer
stream() {
    want=$(cat /rpmd/data.md5)
    got=$(timeout 120 wget -q -O - http://$peer/data | md5sum | cut -d' ' -f1)
    echo "@@RPMD stream from $peer: md5 $got, want $want"
    [ "$got" = "$want" ]
}
check stream stream
counters "after stream"
grep -E "^(Ip|Tcp|Udp):" /proc/net/snmp | sed 's/^/@@RPMD snmp /'
touch /www/done
# Keep serving until the other guest has fetched from us (its done marker).
peer_done() {
    i=0
    while [ $i -lt 120 ]; do
        timeout 5 wget -q -O /dev/null http://$peer/done 2>/dev/null && return 0
        sleep 1; i=$((i + 1))
    done
    return 1
}
check peer-done peer_done
sleep 2
exit $fails
