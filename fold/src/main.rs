//! hoplab-fold: `perf script` output (a file, or standard input) to folded stacks on
//! standard output, byte for byte as FlameGraph's stackcollapse-perf.pl prints them.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use hoplab_fold::chunks::{fold_blocks, BLOCK};
use hoplab_fold::Options;

const USAGE: &str = "usage: hoplab-fold [--pid] [--tid] [--kernel] [--jit] [--all] [--addrs] \
[--event-filter=EVENT] [--threads=N] [--block-size=BYTES] [FILE]";

fn main() -> ExitCode {
    let mut opt = Options::default();
    let mut file: Option<String> = None;
    // The folding spreads over the cores (a few: reading the input bounds it then).
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut block = BLOCK;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--pid" => opt.pid = true,
            "--tid" => opt.tid = true,
            "--kernel" => opt.frames.kernel = true,
            "--jit" => opt.frames.jit = true,
            "--all" => {
                opt.frames.kernel = true;
                opt.frames.jit = true;
            }
            "--addrs" => opt.frames.addrs = true,
            "--event-filter" => match args.next() {
                Some(e) => opt.event_filter = Some(e.into_bytes()),
                None => {
                    eprintln!("hoplab-fold: --event-filter needs an event name\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if a.starts_with("--threads=") => match a["--threads=".len()..].parse() {
                Ok(n) if n >= 1 => threads = n,
                _ => {
                    eprintln!("hoplab-fold: --threads takes a number, 1 or more\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            _ if a.starts_with("--block-size=") => match a["--block-size=".len()..].parse() {
                Ok(n) if n >= 1 => block = n,
                _ => {
                    eprintln!("hoplab-fold: --block-size takes a number of bytes\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            _ if a.starts_with("--event-filter=") => {
                opt.event_filter = Some(a.as_bytes()["--event-filter=".len()..].to_vec());
            }
            _ if a.starts_with('-') && a != "-" => {
                eprintln!("hoplab-fold: unknown option {a}\n{USAGE}");
                return ExitCode::from(2);
            }
            _ if file.is_some() => {
                eprintln!("hoplab-fold: one input file at most\n{USAGE}");
                return ExitCode::from(2);
            }
            _ => file = Some(a),
        }
    }
    let folded = match file.as_deref() {
        None | Some("-") => fold_blocks(io::stdin().lock(), opt, threads, block),
        Some(path) => match File::open(path) {
            Ok(f) => fold_blocks(f, opt, threads, block),
            Err(e) => {
                eprintln!("hoplab-fold: cannot read {path}: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let folded = match folded {
        Ok(f) => f,
        Err(e) => {
            eprintln!("hoplab-fold: reading {}: {e}", file.as_deref().unwrap_or("standard input"));
            return ExitCode::from(2);
        }
    };
    if let Some((_, event)) = &folded.filtered {
        // The script's own words, naming the first event it leaves out.
        eprintln!("Filtering for events of type: {}", String::from_utf8_lossy(event));
    }
    let u = &folded.unrecognized;
    if u.count > 0 {
        for (n, l) in &u.first {
            eprintln!("hoplab-fold: line {n}: unrecognized: {}", String::from_utf8_lossy(l));
        }
        if u.count > u.first.len() as u64 {
            eprintln!("hoplab-fold: {} unrecognized lines in all", u.count);
        }
    }
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    match folded.folder.write(&mut out).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hoplab-fold: writing: {e}");
            ExitCode::from(1)
        }
    }
}
