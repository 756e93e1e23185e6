//! How stackcollapse-perf.pl turns one stack line into frames: offsets stripped, inlined
//! functions split on "->", unknown symbols named after their module, names tidied,
//! and the _[k], _[j], _[i] annotations.

use crate::lines::Frame;

#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub kernel: bool,
    pub jit: bool,
    pub addrs: bool,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

/// `s/\+0x[\da-f]+$//`: hex digits cannot hold a '+', so only the last '+' can start it.
fn strip_offset(f: &[u8]) -> &[u8] {
    if let Some(p) = f.iter().rposition(|&c| c == b'+') {
        let rest = &f[p + 1..];
        if rest.len() > 2
            && rest.starts_with(b"0x")
            && rest[2..].iter().all(|&c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        {
            return &f[..p];
        }
    }
    f
}

/// Perl's `split /->/`: empty fields at the end are dropped (all of them), so an empty
/// string gives no field at all.
fn split_inlined(f: &[u8], out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < f.len() {
        if f[i] == b'-' && f[i + 1] == b'>' {
            out.push((start, i));
            i += 2;
            start = i;
        } else {
            i += 1;
        }
    }
    out.push((start, f.len()));
    while let Some(&(s, e)) = out.last() {
        if s == e {
            out.pop();
        } else {
            break;
        }
    }
}

/// `m/\.\(.*\)\./`: a Go method name such as "net/http.(*Client).Do".
fn go_like(f: &[u8]) -> bool {
    match (find(f, b".("), f.windows(2).rposition(|w| w == b").")) {
        (Some(i), Some(j)) => j >= i + 2,
        _ => false,
    }
}

/// `s/\((?!anonymous namespace\)).*//`: everything from the first '(' that does not open
/// "(anonymous namespace)".
fn cut_arguments(f: &mut Vec<u8>) {
    let mut i = 0;
    while i < f.len() {
        if f[i] == b'(' && !f[i + 1..].starts_with(b"anonymous namespace)") {
            f.truncate(i);
            return;
        }
        i += 1;
    }
}

/// `m:/tmp/perf-\d+\.map:`, anywhere in the module's name.
fn jit_map(module: &[u8]) -> bool {
    let pat = b"/tmp/perf-";
    let mut from = 0;
    while let Some(p) = find(&module[from..], pat) {
        let mut k = from + p + pat.len();
        let d = k;
        while k < module.len() && module[k].is_ascii_digit() {
            k += 1;
        }
        if k > d && module[k..].starts_with(b".map") {
            return true;
        }
        from += p + 1;
    }
    false
}

fn kernel_module(module: &[u8]) -> bool {
    (module.first() == Some(&b'[') || module.ends_with(b"vmlinux")) && !contains(module, b"unknown")
}

/// Appends the frames of one stack line to `out`, joined by ';', and says whether there
/// were any (a line whose function is only an offset gives none).
pub struct Tidier {
    fields: Vec<(usize, usize)>,
    func: Vec<u8>,
}

impl Default for Tidier {
    fn default() -> Self {
        Self::new()
    }
}

impl Tidier {
    pub fn new() -> Self {
        Tidier { fields: Vec::new(), func: Vec::new() }
    }

    /// None: the line is skipped (a process name in parentheses). Some(false): no frame.
    pub fn frames(&mut self, fr: &Frame<'_>, java: bool, opt: Options, out: &mut Vec<u8>)
        -> Option<bool> {
        let raw = strip_offset(fr.func);
        if raw.first() == Some(&b'(') {
            return None;
        }
        split_inlined(raw, &mut self.fields);
        for (idx, &(s, e)) in self.fields.iter().enumerate() {
            let func = &mut self.func;
            func.clear();
            let field = &raw[s..e];
            if field == b"[unknown]" {
                func.push(b'[');
                if fr.module != b"[unknown]" {
                    let base = match fr.module.iter().rposition(|&c| c == b'/') {
                        Some(p) => &fr.module[p + 1..],
                        None => fr.module,
                    };
                    func.extend_from_slice(base);
                } else {
                    func.extend_from_slice(b"unknown");
                }
                if opt.addrs {
                    func.extend_from_slice(b" <");
                    func.extend_from_slice(fr.pc);
                    func.push(b'>');
                }
                func.push(b']');
            } else {
                func.extend_from_slice(field);
            }
            for c in func.iter_mut() {
                if *c == b';' {
                    *c = b':';
                }
            }
            if !go_like(func) {
                cut_arguments(func);
            }
            func.retain(|&c| c != b'"' && c != b'\'');
            if java && func.first() == Some(&b'L') && func.contains(&b'/') {
                func.remove(0);
            }
            if idx > 0 {
                if !contains(func, b"_[i]") {
                    func.extend_from_slice(b"_[i]");
                }
            } else if opt.kernel && kernel_module(fr.module) {
                func.extend_from_slice(b"_[k]");
            } else if opt.jit && jit_map(fr.module) && !contains(func, b"_[j]") {
                func.extend_from_slice(b"_[j]");
            }
            if idx > 0 {
                out.push(b';');
            }
            out.extend_from_slice(func);
        }
        Some(!self.fields.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        split_inlined(s.as_bytes(), &mut v);
        v.iter().map(|&(a, b)| s[a..b].to_string()).collect()
    }

    #[test]
    fn perl_split() {
        assert_eq!(split("a->b"), ["a", "b"]);
        assert_eq!(split("->a->->"), ["", "a"]);
        assert!(split("").is_empty() && split("->").is_empty());
    }

    #[test]
    fn rules() {
        assert_eq!(strip_offset(b"f+0x1+0x2f"), b"f+0x1");
        assert_eq!(strip_offset(b"f+0xAB"), b"f+0xAB");
        assert!(go_like(b"net/http.(*Client).Do") && go_like(b"a.().b"));
        assert!(!go_like(b"f(x).(y)"));
        let mut f = b"ns::(anonymous namespace)::g(int)".to_vec();
        cut_arguments(&mut f);
        assert_eq!(f, b"ns::(anonymous namespace)::g");
        assert!(jit_map(b"/tmp/perf-123.map") && !jit_map(b"/tmp/perf-.map"));
        assert!(kernel_module(b"[kernel.kallsyms]") && !kernel_module(b"[unknown]"));
    }
}
