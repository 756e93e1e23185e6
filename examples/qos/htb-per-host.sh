#!/bin/sh
# Shape the router's uplink to just below the modem's rate, so the queue builds
# here (short, per host) instead of in the modem's deep buffer, and give each
# host its own HTB class, so one host cannot take the whole link. Seed 004's
# script does the same with fq_codel leaves; this kernel has only FIFOs, so the
# leaves are short pfifos.
# usage: htb-per-host.sh DEV RATE HOST_A_ADDR HOST_B_ADDR
set -eu
dev=$1 rate=$2 a=$3 b=$4
tc qdisc replace dev "$dev" root handle 1: htb default 30
tc class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate"
for i in 1 2 3; do
	tc class add dev "$dev" parent 1:1 classid "1:${i}0" htb rate 1mbit ceil "$rate"
	tc qdisc add dev "$dev" parent "1:${i}0" handle "${i}0:" pfifo limit 30
done
tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip src "$a/32" flowid 1:10
tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip src "$b/32" flowid 1:20
