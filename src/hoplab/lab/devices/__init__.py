"""Devices in a lab: checked before anything is touched, changed only as the file
asks, and put back at lab down (and by `hoplab clean` after a crash).

At `lab up`, before anything is created: each host NIC a link attaches must exist
and carry no addresses in use (nics); each device is reached over SSH, an unreachable
or unauthenticated device named (reach); its addresses are read and the ones the file
names must be there, an end with no address taking the one SSH reached (addresses);
every tool the lab or its tests need must be on it (tools); survey asks all of these,
for lab up and for an experiment before its first run. Then, and only then, the
device's settings are changed, each previous value written to the lab's state record
before the new one is set, so a crash at any point leaves a record that says exactly
what to put back (settings). A run's labels name the devices it ran on (labels).
"""
