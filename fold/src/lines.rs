//! The three line shapes of `perf script` output that stackcollapse-perf.pl tells apart
//! with regular expressions, matched here by hand with the same (Perl, backtracking,
//! leftmost-first) results. Each function states the expression it stands for; the
//! reasoning that makes the hand matcher equal to it is next to the code.
//!
//! Perl reads the input as bytes, so `\s`, `\d` and `\w` are ASCII classes there:
//! `\s` is space, \t, \n, \x0B, \x0C, \r (Perl 5.18 and later).

#[inline]
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

#[inline]
pub fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

#[inline]
pub fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A sample's header: `^(\S.+?)\s+(\d+)\/*(\d+)*\s+`.
pub struct Header<'a> {
    pub comm: &'a [u8],
    pub pid: &'a [u8],
    /// The digits after the slash of "PID/TID", if any.
    pub tid: Option<&'a [u8]>,
}

/// After the whitespace that ends the command name, `(\d+)\/*(\d+)*\s+` must cover the
/// next whitespace-free token and stop at a whitespace character. As no part of it can
/// match whitespace, it matches exactly when the token is digits, slashes, digits (the
/// first run not empty) and whitespace follows it; greedy matching then gives the whole
/// first digit run to the PID and the second (if not empty) to the TID.
fn pid_token(l: &[u8], j: usize) -> Option<(&[u8], Option<&[u8]>)> {
    let n = l.len();
    let mut k = j;
    while k < n && is_digit(l[k]) {
        k += 1;
    }
    if k == j {
        return None;
    }
    let pid = &l[j..k];
    while k < n && l[k] == b'/' {
        k += 1;
    }
    let t = k;
    while k < n && is_digit(l[k]) {
        k += 1;
    }
    if k < n && is_space(l[k]) {
        Some((pid, if k > t { Some(&l[t..k]) } else { None }))
    } else {
        None
    }
}

/// `(\S.+?)` is lazy: the command name is the shortest prefix of two or more characters
/// that is followed by whitespace and a PID token. Every start inside one whitespace run
/// leads to the same token, so each run is tried once.
pub fn header(l: &[u8]) -> Option<Header<'_>> {
    let n = l.len();
    if n == 0 || is_space(l[0]) {
        return None;
    }
    let mut i = 2;
    while i < n {
        if is_space(l[i]) {
            let mut j = i;
            while j < n && is_space(l[j]) {
                j += 1;
            }
            if let Some((pid, tid)) = pid_token(l, j) {
                return Some(Header { comm: &l[..i], pid, tid });
            }
            i = j;
        } else {
            i += 1;
        }
    }
    None
}

/// A sample's period and event: `:\s*(\d+)*\s+(\S+):\s*$` on the header line.
pub struct Event<'a> {
    pub period: Option<&'a [u8]>,
    pub event: &'a [u8],
}

/// `(\S+):\s*$` puts the event's last character just before the line's last non-space
/// character, a colon, and `\s+` before it makes the event the whole whitespace-free run
/// there. Between the leading colon and that run only `\s*(\d+)*\s+` may stand, which
/// holds whitespace and digits alone: one colon at most can start a match, found by
/// walking back over whitespace, digits and whitespace. The repeated group captures its
/// last iteration, which greedy matching makes the whole digit run.
pub fn event(l: &[u8]) -> Option<Event<'_>> {
    let mut e = l.len();
    while e > 0 && is_space(l[e - 1]) {
        e -= 1;
    }
    if e == 0 || l[e - 1] != b':' {
        return None;
    }
    let wend = e - 1;
    let mut ws = wend;
    while ws > 0 && !is_space(l[ws - 1]) {
        ws -= 1;
    }
    if ws == wend {
        return None;
    }
    let mut k = ws;
    while k > 0 && is_space(l[k - 1]) {
        k -= 1;
    }
    if k == ws {
        return None;
    }
    let dend = k;
    while k > 0 && is_digit(l[k - 1]) {
        k -= 1;
    }
    let dstart = k;
    while k > 0 && is_space(l[k - 1]) {
        k -= 1;
    }
    if k == 0 || l[k - 1] != b':' {
        return None;
    }
    Some(Event {
        period: if dstart < dend { Some(&l[dstart..dend]) } else { None },
        event: &l[ws..wend],
    })
}

/// A stack line: `^\s*(\w+)\s*(.+) \((.*)\)`, not anchored at the end.
pub struct Frame<'a> {
    pub pc: &'a [u8],
    pub func: &'a [u8],
    pub module: &'a [u8],
}

/// Greedy `(.*)\)` ends the module at the line's last ')'; greedy `(.+) \(` then ends the
/// function at the last " (" that still has that ')' after it. Backtracking tries the
/// function's start at every position from after `\w+\s*` (both as long as they go) back
/// to one past the word's first character, latest first: the first that leaves the
/// function non-empty wins, and the word is cut where the function starts, if earlier.
pub fn frame(l: &[u8]) -> Option<Frame<'_>> {
    let n = l.len();
    let mut a = 0;
    while a < n && is_space(l[a]) {
        a += 1;
    }
    let mut b = a;
    while b < n && is_word(l[b]) {
        b += 1;
    }
    if b == a {
        return None;
    }
    let close = l.iter().rposition(|&c| c == b')')?;
    if close < 2 {
        return None;
    }
    let mut e = close - 2;
    let open = loop {
        if l[e] == b' ' && l[e + 1] == b'(' {
            break e;
        }
        if e == 0 {
            return None;
        }
        e -= 1;
    };
    let mut c = b;
    while c < n && is_space(l[c]) {
        c += 1;
    }
    if open == 0 {
        return None;
    }
    let q = c.min(open - 1);
    if q < a + 1 {
        return None;
    }
    Some(Frame { pc: &l[a..q.min(b)], func: &l[q..open], module: &l[open + 2..close] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers() {
        let h = header(b"java 24636/25607 [000] 4794564.109216: 100 cycles:").unwrap();
        assert_eq!((h.comm, h.pid, h.tid), (&b"java"[..], &b"24636"[..], Some(&b"25607"[..])));
        let h = header(b"V8 WorkerThread 25607 4794564.109216: 104345 cycles:").unwrap();
        assert_eq!((h.comm, h.pid, h.tid), (&b"V8 WorkerThread"[..], &b"25607"[..], None));
        // The name has two characters at least: "a" alone never matches...
        assert!(header(b"a 1 x").is_none());
        // ...and a second space joins the name.
        assert_eq!(header(b"a  1 x").unwrap().comm, b"a ");
        assert!(header(b"\tffff foo (bar)").is_none());
        assert!(header(b"ab 12/34/5 x").is_none());
        assert_eq!(header(b"ab 12/ x").unwrap().tid, None);
    }

    #[test]
    fn events() {
        let e = event(b"java 12688 [002] 6544038.708352: 235 cpu-clock:").unwrap();
        assert_eq!((e.period, e.event), (Some(&b"235"[..]), &b"cpu-clock"[..]));
        let e = event(b"swapper 0 [000] 158665.570607: cpu-clock: ").unwrap();
        assert_eq!((e.period, e.event), (None, &b"cpu-clock"[..]));
        let e = event(b"x 1 1.0: 5 sched:sched_switch:").unwrap();
        assert_eq!(e.event, b"sched:sched_switch");
        assert!(event(b"x 1 1.0: 5 sched:sched_switch: prev=1").is_none());
        assert!(event(b"x 1 1.0: 1 2 cycles:").is_none());
    }

    #[test]
    fn frames() {
        let f = frame(b"\t ffffffff8103ce3b native_safe_halt ([kernel.kallsyms])").unwrap();
        assert_eq!((f.pc, f.func, f.module),
                   (&b"ffffffff8103ce3b"[..], &b"native_safe_halt"[..], &b"[kernel.kallsyms]"[..]));
        let f = frame(b"  7f0 f(int) (/lib/x.so) trailing").unwrap();
        assert_eq!((f.func, f.module), (&b"f(int)"[..], &b"/lib/x.so"[..]));
        // The word gives up characters so that the function is not empty.
        let f = frame(b"  ffff (bar)").unwrap();
        assert_eq!((f.pc, f.func, f.module), (&b"fff"[..], &b"f"[..], &b"bar"[..]));
        assert!(frame(b"  f (bar)").is_none());
    }
}
