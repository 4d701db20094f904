//! perfread FILE: reads every record of a file-mode perf.data with the
//! linux-perf-data crate, parses each, and prints one line per record
//! type with its count, then the build IDs of the header. Any error is
//! printed and exits 1: synth's tests use it as a reader nobody at synth
//! wrote. (linux-perf-data 0.6 reads file mode only.)

use linux_perf_data::linux_perf_event_reader::EventRecord;
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use std::collections::BTreeMap;
use std::error::Error;
use std::fs::File;
use std::io::BufReader;

fn main() {
    let path = match std::env::args().nth(1) {
        Some(p) => p,
        None => {
            eprintln!("usage: perfread FILE");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&path) {
        eprintln!("perfread: {}: {}", path, e);
        std::process::exit(1);
    }
}

fn run(path: &str) -> Result<(), Box<dyn Error>> {
    let reader = BufReader::new(File::open(path)?);
    let PerfFileReader { mut perf_file, mut record_iter } = PerfFileReader::parse_file(reader)?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(record) = record_iter.next_record(&mut perf_file)? {
        let name = match record {
            PerfFileRecord::EventRecord { record, .. } => {
                let name = format!("{:?}", record.record_type);
                match record.parse()? {
                    EventRecord::Mmap2(m) => {
                        if m.path.as_slice().is_empty() {
                            return Err(format!("MMAP2 of pid {} without a path", m.pid).into());
                        }
                    }
                    EventRecord::Comm(c) => {
                        if c.name.as_slice().is_empty() {
                            return Err(format!("COMM of tid {} without a name", c.tid).into());
                        }
                    }
                    _ => {}
                }
                name
            }
            PerfFileRecord::UserRecord(record) => {
                let name = format!("{:?}", record.record_type);
                record.parse()?;
                name
            }
        };
        *counts.entry(name).or_insert(0) += 1;
    }
    for (name, n) in &counts {
        println!("{} {}", name, n);
    }
    println!("build-ids {}", perf_file.build_ids()?.len());
    Ok(())
}
