//! Folding `perf script` output into one line per distinct stack, with the rules of
//! FlameGraph's stackcollapse-perf.pl (its options --pid, --tid, --kernel, --jit, --all,
//! --addrs and --event-filter), reading the input once, line by line: memory holds the
//! distinct stacks, not the input.
//!
//! The state machine follows the script's: a header line names the process (and sets
//! the period), stack lines are prepended, a blank line ends the sample. Its quirks are
//! kept, because the output must be byte for byte the script's: a sample with no frame
//! counts under its process name alone; a sample whose event differs from the first
//! event seen is dropped; a record not ended by a blank line is not counted; a period of
//! "0" counts one.

pub mod chunks;
pub mod hash;
pub mod lines;
pub mod tidy;

use std::collections::HashMap;
use std::io::{self, Write};

use hash::FxBuild;
pub use tidy::Options as FrameOptions;

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub pid: bool,
    pub tid: bool,
    pub frames: FrameOptions,
    pub event_filter: Option<Vec<u8>>,
}

/// Lines the script would warn about ("Unrecognized line"): how many, and the first few.
#[derive(Debug, Default)]
pub struct Unrecognized {
    pub count: u64,
    pub first: Vec<(u64, Vec<u8>)>,
}

/// What one chunk of the input gave to report, with line numbers inside the chunk.
#[derive(Debug, Default)]
pub struct ChunkInfo {
    pub index: usize,
    pub lines: u64,
    pub unrecognized: Unrecognized,
    pub filtered: Option<(u64, Vec<u8>)>,
}

pub struct Folder {
    opt: Options,
    stacks: HashMap<Box<[u8]>, u64, FxBuild>,
    pname: Vec<u8>,
    has_pname: bool,
    java: bool,
    period: u64,
    filter: Option<Vec<u8>>,
    defaulted: bool,
    /// The first sample dropped for its event, when the event was not asked for: the
    /// script warns about it once ("Filtering for events of type: EVENT").
    pub filtered: Option<(u64, Vec<u8>)>,
    /// The current sample's frames, one segment per stack line (leaf first).
    arena: Vec<u8>,
    segs: Vec<(usize, usize)>,
    key: Vec<u8>,
    tidier: tidy::Tidier,
    line_no: u64,
    pub unrecognized: Unrecognized,
}

/// Perl's numeric value of a digit string (saturating where Perl would turn to floating
/// point, far beyond any real period sum).
fn number(d: &[u8]) -> u64 {
    d.iter().fold(0u64, |acc, &c| acc.saturating_mul(10).saturating_add(u64::from(c - b'0')))
}

impl Folder {
    pub fn new(opt: Options) -> Self {
        let filter = opt.event_filter.clone().filter(|f| !f.is_empty());
        Folder {
            opt,
            stacks: HashMap::default(),
            pname: Vec::new(),
            has_pname: false,
            java: false,
            period: 1,
            filter,
            defaulted: false,
            filtered: None,
            arena: Vec::new(),
            segs: Vec::new(),
            key: Vec::new(),
            tidier: tidy::Tidier::new(),
            line_no: 0,
            unrecognized: Unrecognized::default(),
        }
    }

    /// One line, without its "\n" (a "\r" stays, as Perl's chomp leaves it).
    pub fn line(&mut self, l: &[u8]) {
        self.line_no += 1;
        if l.first() == Some(&b'#') {
            return;
        }
        if l.is_empty() {
            self.end_sample();
            return;
        }
        if let Some(h) = lines::header(l) {
            let mut period: Option<&[u8]> = None;
            if let Some(ev) = lines::event(l) {
                period = ev.period;
                match &self.filter {
                    None => {
                        self.filter = Some(ev.event.to_vec());
                        self.defaulted = true;
                    }
                    Some(f) if f.as_slice() != ev.event => {
                        if self.defaulted && self.filtered.is_none() {
                            self.filtered = Some((self.line_no, ev.event.to_vec()));
                        }
                        return;
                    }
                    Some(_) => {}
                }
            }
            self.period = match period {
                None | Some(b"0") => 1,
                Some(d) => number(d),
            };
            // `if (not $tid) { $tid = $pid; $pid = "?" }`: no TID, or a TID of "0".
            let (pid, tid): (&[u8], &[u8]) = match h.tid {
                Some(t) if t != b"0" => (h.pid, t),
                _ => (b"?", h.pid),
            };
            self.pname.clear();
            self.pname.extend_from_slice(h.comm);
            if self.opt.tid {
                self.pname.push(b'-');
                self.pname.extend_from_slice(pid);
                self.pname.push(b'/');
                self.pname.extend_from_slice(tid);
            } else if self.opt.pid {
                self.pname.push(b'-');
                self.pname.extend_from_slice(pid);
            }
            for c in self.pname.iter_mut() {
                if *c == b' ' {
                    *c = b'_';
                }
            }
            // Perl's truth: the name is never "" or "0" (a command name has two
            // characters at least), so a header always makes the sample live.
            self.has_pname = true;
            self.java = self.pname.starts_with(b"java");
        } else if let Some(fr) = lines::frame(l) {
            if !self.has_pname {
                return;
            }
            let start = self.arena.len();
            match self.tidier.frames(&fr, self.java, self.opt.frames, &mut self.arena) {
                Some(true) => self.segs.push((start, self.arena.len())),
                _ => self.arena.truncate(start),
            }
        } else {
            let u = &mut self.unrecognized;
            u.count += 1;
            if u.first.len() < 5 {
                u.first.push((self.line_no, l.to_vec()));
            }
        }
    }

    fn end_sample(&mut self) {
        if !self.has_pname {
            return;
        }
        let key = &mut self.key;
        key.clear();
        key.extend_from_slice(&self.pname);
        for &(s, e) in self.segs.iter().rev() {
            key.push(b';');
            key.extend_from_slice(&self.arena[s..e]);
        }
        match self.stacks.get_mut(key.as_slice()) {
            Some(c) => *c += self.period,
            None => {
                self.stacks.insert(key.as_slice().into(), self.period);
            }
        }
        self.arena.clear();
        self.segs.clear();
        self.has_pname = false;
    }

    /// The lines of `chunk`: each ends at a '\n' or at the chunk's end, as Perl's `<>`
    /// reads them (the last line of a file may lack its '\n').
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut start = 0;
        while start < chunk.len() {
            let end = memchr::memchr(b'\n', &chunk[start..]).map_or(chunk.len(), |p| start + p);
            self.line(&chunk[start..end]);
            start = end + 1;
        }
    }

    /// Feeds one chunk of the input, numbering its lines from 1, and hands back what it
    /// found to report (line numbers are made global when the chunks are put in order).
    pub fn feed_chunk(&mut self, index: usize, chunk: &[u8]) -> ChunkInfo {
        self.line_no = 0;
        self.feed(chunk);
        ChunkInfo {
            index,
            lines: self.line_no,
            unrecognized: std::mem::take(&mut self.unrecognized),
            filtered: self.filtered.take(),
        }
    }

    /// The event samples are kept for, once known (given, or the first one seen).
    pub fn event_filter(&self) -> Option<&[u8]> {
        self.filter.as_deref()
    }

    /// A folder for a later part of the input, the event filter already decided.
    pub fn continuing(&self) -> Folder {
        let mut f = Folder::new(self.opt.clone());
        f.filter = self.filter.clone();
        f.defaulted = self.defaulted;
        f
    }

    /// Adds the stacks another folder counted.
    pub fn absorb(&mut self, other: Folder) {
        for (k, v) in other.stacks {
            *self.stacks.entry(k).or_insert(0) += v;
        }
    }

    /// The folded stacks, sorted byte by byte as Perl's `sort { $a cmp $b }` does.
    pub fn write<W: Write>(&self, out: &mut W) -> io::Result<()> {
        let mut keys: Vec<(&[u8], u64)> = self.stacks.iter().map(|(k, &v)| (&**k, v)).collect();
        keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (k, v) in keys {
            out.write_all(k)?;
            writeln!(out, " {v}")?;
        }
        Ok(())
    }

    pub fn distinct(&self) -> usize {
        self.stacks.len()
    }
}
