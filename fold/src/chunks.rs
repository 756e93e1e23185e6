//! Reading the input in chunks that end at a blank line, and folding them on several
//! threads.
//!
//! A blank line ends a sample, and after one the script's state is empty again (no
//! process name, no frames; the period is set anew by the next header). A chunk cut
//! just after a blank line therefore folds the same alone as in sequence, given the one
//! thing the script carries across the whole input: the event it keeps, which is the
//! first event seen unless one was asked for. Chunks are folded in order on this thread
//! until that is known, then spread over the workers. Memory holds a few chunks and
//! each worker's distinct stacks, whatever the input's size.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::thread;

use crate::{ChunkInfo, Folder, Options, Unrecognized};

/// About 10,000 lines of perf script.
pub const BLOCK: usize = 1 << 20;
const SHOWN: usize = 5;

/// The next chunk: whole lines up to the last blank line of the block read, or the rest
/// of the input. `carry` holds what followed the previous chunk's last blank line;
/// `buf` is an emptied buffer to fill (buffers go round, so memory stays flat).
pub fn next_chunk<R: Read>(input: &mut R, carry: &mut Vec<u8>, mut buf: Vec<u8>,
                           block: usize) -> io::Result<Option<Vec<u8>>> {
    buf.clear();
    buf.extend_from_slice(carry);
    carry.clear();
    loop {
        let searched = buf.len().saturating_sub(1);
        buf.reserve(block);
        if input.by_ref().take(block as u64).read_to_end(&mut buf)? == 0 {
            return Ok(if buf.is_empty() { None } else { Some(buf) });
        }
        // Only what was just read can hold a new "\n\n" (one byte back: its first half).
        if let Some(p) = memchr::memmem::rfind(&buf[searched..], b"\n\n") {
            let cut = searched + p + 2;
            carry.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
            return Ok(Some(buf));
        }
    }
}

/// The folded input and what to report about it, line numbers counted from its start.
pub struct Folded {
    pub folder: Folder,
    pub unrecognized: Unrecognized,
    /// The first sample's event that the (default) filter dropped, and its line.
    pub filtered: Option<(u64, Vec<u8>)>,
}

/// What the chunks reported, merged in input order as they come: a chunk folded ahead of
/// an earlier one waits for it (those in flight, a few), the others are added at once, so
/// that the report does not grow with the number of chunks (it held one entry per chunk:
/// 3 MB more for 190 MB read in 4 KiB blocks).
#[derive(Default)]
struct Reports {
    next: usize,
    early: BTreeMap<usize, ChunkInfo>,
    offset: u64,
    unrecognized: Unrecognized,
    filtered: Option<(u64, Vec<u8>)>,
}

impl Reports {
    fn add(&mut self, info: ChunkInfo) {
        self.early.insert(info.index, info);
        while let Some(info) = self.early.remove(&self.next) {
            let u = &mut self.unrecognized;
            u.count += info.unrecognized.count;
            for (n, line) in info.unrecognized.first {
                if u.first.len() < SHOWN {
                    u.first.push((self.offset + n, line));
                }
            }
            if self.filtered.is_none() {
                self.filtered = info.filtered.map(|(n, e)| (self.offset + n, e));
            }
            self.offset += info.lines;
            self.next += 1;
        }
    }

    fn finish(self, folder: Folder) -> Folded {
        debug_assert!(self.early.is_empty(), "a chunk's report never came");
        Folded { folder, unrecognized: self.unrecognized, filtered: self.filtered }
    }
}

/// Folds all of `input` on `threads` threads (1: all on this one).
pub fn fold<R: Read>(input: R, opt: Options, threads: usize) -> io::Result<Folded> {
    fold_blocks(input, opt, threads, BLOCK)
}

/// `fold`, reading `block` bytes at a time (small blocks test the cutting).
pub fn fold_blocks<R: Read>(mut input: R, opt: Options, threads: usize, block: usize)
    -> io::Result<Folded> {
    let mut main = Folder::new(opt);
    let mut reports = Reports::default();
    let mut carry = Vec::new();
    let mut index = 0;
    let mut spare = Vec::new();
    while threads <= 1 || main.event_filter().is_none() {
        match next_chunk(&mut input, &mut carry, std::mem::take(&mut spare), block)? {
            None => return Ok(reports.finish(main)),
            Some(chunk) => {
                reports.add(main.feed_chunk(index, &chunk));
                spare = chunk;
            }
        }
        index += 1;
    }
    let (tx, rx) = sync_channel::<(usize, Vec<u8>)>(threads);
    let rx = Arc::new(Mutex::new(rx));
    let reports = Mutex::new(reports);
    // Folded chunks come back to be filled again.
    let (back_tx, back_rx) = sync_channel::<Vec<u8>>(2 * threads + 1);
    let read = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let rx = Arc::clone(&rx);
                let back = back_tx.clone();
                let mut folder = main.continuing();
                let reports = &reports;
                scope.spawn(move || {
                    loop {
                        // The lock is held only to take the next chunk.
                        let next = rx.lock().map(|r| r.recv());
                        match next {
                            Ok(Ok((i, chunk))) => {
                                let info = folder.feed_chunk(i, &chunk);
                                reports.lock().expect("a folding thread panicked").add(info);
                                let _ = back.try_send(chunk);
                            }
                            _ => return folder,
                        }
                    }
                })
            })
            .collect();
        drop(back_tx);
        let mut read = Ok(());
        loop {
            let buf = back_rx.try_recv().unwrap_or_else(|_| std::mem::take(&mut spare));
            match next_chunk(&mut input, &mut carry, buf, block) {
                Ok(Some(chunk)) => {
                    if tx.send((index, chunk)).is_err() {
                        break;
                    }
                    index += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    read = Err(e);
                    break;
                }
            }
        }
        drop(tx);
        for w in workers {
            main.absorb(w.join().expect("a folding thread panicked"));
        }
        read
    });
    read?;
    Ok(reports.into_inner().expect("a folding thread panicked").finish(main))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Line = (u64, Vec<u8>);

    fn folded(input: &[u8], threads: usize, block: usize)
        -> (Vec<u8>, u64, Vec<Line>, Option<Line>) {
        let mut opt = Options::default();
        opt.frames.kernel = true;
        let f = fold_blocks(input, opt, threads, block).unwrap();
        let mut out = Vec::new();
        f.folder.write(&mut out).unwrap();
        (out, f.unrecognized.count, f.unrecognized.first, f.filtered)
    }

    #[test]
    fn chunks_and_threads_change_nothing() {
        let mut input = Vec::new();
        for i in 0..300 {
            input.extend_from_slice(format!(
                "p{} {} [000] 1.{i}: {} {}:\n\tffff f{} ([kernel.kallsyms])\n\tab g (/x)\n{}\n",
                i % 7, i % 5, 1 + i % 3, if i % 11 == 3 { "instructions" } else { "cycles" },
                i % 13, if i % 17 == 0 { "junk line" } else { "" }).as_bytes());
        }
        input.extend_from_slice(b"last 1 1.0: cycles:\n\t1 h (/x)");   // no blank line: not counted
        let want = folded(&input, 1, 1 << 20);
        assert!(want.1 > 5 && want.3.is_some() && want.0.len() > 100);
        for threads in 1..=4 {
            for block in [1, 2, 7, 64, 1000] {
                assert_eq!(folded(&input, threads, block), want, "threads {threads}, block {block}");
            }
        }
    }
}
