//! Reading flow files: a million rules in well under a second, with the errors and warnings
//! of a line-by-line read.
//!
//! A file is read twice. The first pass only looks for table declarations (`table=N(name)`),
//! which a rule may use before or after the line that makes them: it scans the raw bytes for
//! `table=` followed by digits and `(`, and parses just those lines. The second pass reads the
//! lines in batches that worker threads parse while the caller takes the rules in file order,
//! so a caller building a pipeline from them builds while later batches are being parsed.
//! The first error in file order wins, whichever thread met it; a file with any error yields
//! an error, never part of its rules.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use super::action::{conjunctions, Action, Conjunction};
use super::action_pool::{LocalLists, SharedLists};
use super::names::Names;
use super::parser::{declare_tables, parse_flow_line, FlowFileError};
use super::rule::{Match, Rule};

/// Longest line a flow or updates file may have: far beyond any real rule (OVS's own are a
/// few hundred bytes), and small enough that a damaged file cannot make the reader hold
/// hundreds of megabytes for one line.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

/// Lines a batch of the parse holds: small enough that the first rules reach the caller
/// soon, large enough that handing batches between threads costs nothing measurable.
const PARSE_BATCH_LINES: usize = 16_384;

/// Most threads a flow file's parse uses.
const MAX_PARSE_THREADS: usize = 8;

/// Bytes the declaration scan reads at a time.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// An error about the file as a whole (line 0).
fn whole_file_error(file: &str, message: String) -> FlowFileError {
    FlowFileError { file: file.to_string(), line: 0, column: 0, token: String::new(), message }
}

fn cannot_read(file: &str, e: &std::io::Error) -> FlowFileError {
    whole_file_error(file, format!("cannot read: {}", crate::os_reason(e)))
}

/// The error of a line too long to read (`line`: its 1-based number).
fn too_long(file: &str, line: usize) -> FlowFileError {
    FlowFileError::at(file, line, 1, "", format!("line longer than {MAX_LINE_BYTES} bytes"))
}

/// `bytes` (one line, with its newline if it has one) as text, or the error naming the line.
fn line_text<'a>(bytes: &'a [u8], file: &str, line: usize) -> Result<&'a str, FlowFileError> {
    std::str::from_utf8(bytes)
        .map_err(|e| FlowFileError::at(file, line, 1, "", format!("not UTF-8 text ({e})")))
}

/// Reads the text file at `path` line by line, never holding more than one line of at most
/// [`MAX_LINE_BYTES`], and calls `each(line, number, name)`. Errors name the file (and the
/// line): one that cannot be read, a line too long, a line that is not UTF-8.
pub(crate) fn read_lines(
    path: &Path,
    mut each: impl FnMut(&str, usize, &str) -> Result<(), FlowFileError>,
) -> Result<(), FlowFileError> {
    use std::io::BufRead;
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| cannot_read(&name, &e))?;
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    for number in 1.. {
        buf.clear();
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| cannot_read(&name, &e))?;
        if n == 0 {
            return Ok(());
        }
        if buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
            return Err(too_long(&name, number));
        }
        let text = line_text(&buf, &name, number)?;
        each(text.trim_end_matches(['\n', '\r']), number, &name)?;
    }
    Ok(())
}

/// Reads and parses a flow file.
pub fn read_flow_file(path: &Path) -> Result<Vec<Rule>, FlowFileError> {
    read_flow_file_named(path, &mut Names::new())
}

/// [`read_flow_file`] with table and port `names`, to which the file's own declarations are
/// added.
pub fn read_flow_file_named(path: &Path, names: &mut Names) -> Result<Vec<Rule>, FlowFileError> {
    read_flow_file_checked(path, names).map(|(rules, _)| rules)
}

/// [`read_flow_file_named`], also returning warnings: what Open vSwitch accepts but cannot
/// work as written (a conjunction some clause of which no flow provides), each with file,
/// line, column and token.
pub fn read_flow_file_checked(
    path: &Path,
    names: &mut Names,
) -> Result<(Vec<Rule>, Vec<FlowFileError>), FlowFileError> {
    let mut rules = Vec::new();
    let warnings = stream_flow_file(path, names, |rule| rules.push(rule))?;
    Ok((rules, warnings))
}

/// Reads and parses a flow file, giving its rules to `each` in file order while later lines
/// are still being parsed; returns the warnings of [`read_flow_file_checked`]. On an error,
/// `each` has seen some of the rules: what it built from them is to be dropped.
pub fn stream_flow_file(
    path: &Path,
    names: &mut Names,
    each: impl FnMut(Rule),
) -> Result<Vec<FlowFileError>, FlowFileError> {
    stream_in_batches(path, names, each, PARSE_BATCH_LINES)
}

/// [`stream_flow_file`] in batches of `batch_lines` (tests make them small).
fn stream_in_batches(
    path: &Path,
    names: &mut Names,
    mut each: impl FnMut(Rule),
    batch_lines: usize,
) -> Result<Vec<FlowFileError>, FlowFileError> {
    declare_file_tables(path, names)?;
    let names: &Names = names;
    let file = path.display().to_string();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_PARSE_THREADS);
    let mut taker = RuleTaker::new(&file);
    let lists = SharedLists::default();
    std::thread::scope(|s| {
        // Bounded both ways: a slow caller holds back the parse, which holds back the read,
        // so a few batches are in memory at a time, not the file.
        let (lines_tx, lines_rx) = mpsc::sync_channel(workers);
        let (parsed_tx, parsed_rx) = mpsc::sync_channel(workers);
        s.spawn(move || read_batches(path, batch_lines, &lines_tx));
        let lines_rx = Arc::new(Mutex::new(lines_rx));
        for _ in 0..workers {
            let (lines_rx, parsed_tx, file, lists) =
                (Arc::clone(&lines_rx), parsed_tx.clone(), &file, &lists);
            s.spawn(move || parse_batches(&lines_rx, &parsed_tx, file, names, lists));
        }
        // The workers hold the only ends left: when they stop, the reader's sends fail, and
        // when the caller stops early (dropping `parsed_rx`), the workers' sends fail.
        drop((lines_rx, parsed_tx));
        take_in_order(parsed_rx, |(batch, parsed)| taker.take(&batch, parsed, &mut each))
    })?;
    Ok(taker.warnings())
}

/// Lines of a flow file read but not parsed yet, with their line numbers.
#[derive(Default)]
struct LineBatch {
    text: String,
    /// (start, end, line number) of each line in `text`.
    spans: Vec<(usize, usize, usize)>,
}

impl LineBatch {
    fn push(&mut self, line: &str, number: usize) {
        self.spans.push((self.text.len(), self.text.len() + line.len(), number));
        self.text.push_str(line);
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    /// The lines with their numbers, in order.
    fn lines(&self) -> impl Iterator<Item = (&str, usize)> {
        self.spans.iter().map(|&(a, b, n)| (&self.text[a..b], n))
    }
}

/// A batch of lines as read (in sequence `.0`), or the read's error in its place.
type ReadBatch = (usize, Result<LineBatch, FlowFileError>);

/// A batch's lines parsed: the rules with the index of their line in the batch, then the
/// first error, if a line has one (the lines after it are not parsed). Kept apart, the
/// rules are compact: they cross from a worker's cache to the caller's.
#[derive(Default)]
struct ParsedLines {
    rules: Vec<(u32, Rule)>,
    error: Option<FlowFileError>,
}

/// A batch with its lines parsed (in sequence `.0`), or the read's error in its place.
type ParsedBatch = (usize, Result<(LineBatch, ParsedLines), FlowFileError>);

/// The reader's thread: the file's lines in batches, numbered in order; a read error takes
/// the place after the lines read before it. Stops when nobody parses any more.
fn read_batches(path: &Path, batch_lines: usize, out: &SyncSender<ReadBatch>) {
    let (mut seq, mut batch, mut stopped) = (0, LineBatch::default(), false);
    let read = read_lines(path, |line, number, file| {
        batch.push(line, number);
        if batch.len() < batch_lines {
            return Ok(());
        }
        if out.send((seq, Ok(std::mem::take(&mut batch)))).is_err() {
            stopped = true;
            return Err(whole_file_error(file, "parse stopped".into()));
        }
        seq += 1;
        Ok(())
    });
    if stopped || out.send((seq, Ok(batch))).is_err() {
        return;
    }
    if let Err(e) = read {
        let _ = out.send((seq + 1, Err(e)));
    }
}

/// A worker's thread: parses batches until there are no more or nobody takes them.
fn parse_batches(
    lines: &Mutex<Receiver<ReadBatch>>,
    out: &SyncSender<ParsedBatch>,
    file: &str,
    names: &Names,
    lists: &SharedLists,
) {
    // Equal action lists shared here, where a duplicate is freed by the thread that made it,
    // so that the caller's pools find every list by its address, without hashing actions.
    let mut lists = LocalLists::new(lists);
    let mut parse = |batch: &LineBatch| {
        let mut parsed = ParsedLines::default();
        for (i, (line, number)) in batch.lines().enumerate() {
            match parse_flow_line(line, number, file, names) {
                Ok(Some(mut rule)) => {
                    lists.share(&mut rule.actions);
                    parsed.rules.push((i as u32, rule));
                }
                Ok(None) => {}
                Err(e) => {
                    parsed.error = Some(e);
                    break;
                }
            }
        }
        parsed
    };
    loop {
        // A poisoned lock means another worker panicked; the scope re-raises its panic.
        let Ok(next) = lines.lock().map(|rx| rx.recv()) else { return };
        let Ok((seq, read)) = next else { return };
        let parsed = read.map(|batch| {
            let parsed = parse(&batch);
            (batch, parsed)
        });
        if out.send((seq, parsed)).is_err() {
            return;
        }
    }
}

/// Gives the batches to `take` in sequence order as they arrive, until the channel closes or
/// an error (a batch's, or `take`'s). Returning drops `parsed`, which stops the workers.
fn take_in_order(
    parsed: Receiver<ParsedBatch>,
    mut take: impl FnMut((LineBatch, ParsedLines)) -> Result<(), FlowFileError>,
) -> Result<(), FlowFileError> {
    let (mut waiting, mut next) = (BTreeMap::new(), 0);
    for (seq, batch) in parsed {
        waiting.insert(seq, batch);
        while let Some(batch) = waiting.remove(&next) {
            take(batch?)?;
            next += 1;
        }
    }
    Ok(())
}

/// What the caller's thread does with each parsed rule, in file order: notes conjunction
/// clauses and meters for the warnings, and hands it on (its action list is shared already,
/// by the parsing threads' [`SharedLists`]).
struct RuleTaker<'f> {
    file: &'f str,
    clauses: Clauses,
    /// How many flows use a meter, and where the first does.
    metered: usize,
    first_meter: Option<FlowFileError>,
}

impl<'f> RuleTaker<'f> {
    fn new(file: &'f str) -> Self {
        RuleTaker { file, clauses: Clauses::default(), metered: 0, first_meter: None }
    }

    fn take(
        &mut self,
        batch: &LineBatch,
        parsed: ParsedLines,
        each: &mut impl FnMut(Rule),
    ) -> Result<(), FlowFileError> {
        for (i, rule) in parsed.rules {
            let (a, b, number) = batch.spans[i as usize];
            let line = &batch.text[a..b];
            self.clauses.note(&rule, line, number);
            if rule.actions.iter().any(|a| matches!(a, Action::Meter(_))) {
                self.metered += 1;
                if self.first_meter.is_none() {
                    let column = line.find("meter").map_or(1, |i| i + 1);
                    let token: String = line[column - 1..].chars().take_while(|c| *c != ',').collect();
                    self.first_meter =
                        Some(FlowFileError::at(self.file, number, column, &token, String::new()));
                }
            }
            each(rule);
        }
        parsed.error.map_or(Ok(()), Err)
    }

    fn warnings(self) -> Vec<FlowFileError> {
        let mut warnings = self.clauses.problems(self.file);
        if let Some(mut w) = self.first_meter {
            w.message = format!(
                "{} flow(s) use meters: accepted, but rate limits are not modelled (what a meter \
                 would drop is forwarded)",
                self.metered
            );
            warnings.push(w);
        }
        warnings
    }
}

/// Adds the table names the file at `path` declares (`table=N(name)`) to `names`, with the
/// errors a line-by-line read meets first (a line too long or not UTF-8, a bad declaration).
/// Only the lines holding `table=`, digits and `(` are parsed; the others are only counted.
fn declare_file_tables(path: &Path, names: &mut Names) -> Result<(), FlowFileError> {
    let name = path.display().to_string();
    let mut file = std::fs::File::open(path).map_err(|e| cannot_read(&name, &e))?;
    let finder = memchr::memmem::Finder::new(b"table=");
    // `buf[..held]` is the start of a line the last read did not finish.
    let (mut buf, mut held, mut line) = (Vec::new(), 0, 1);
    loop {
        buf.resize(held + SCAN_CHUNK_BYTES, 0);
        let n = match file.read(&mut buf[held..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cannot_read(&name, &e)),
        };
        let end = held + n;
        let whole_lines = match n {
            0 => end,
            _ => match memchr::memrchr(b'\n', &buf[held..end]) {
                Some(i) => held + i + 1,
                None if end > MAX_LINE_BYTES => return Err(too_long(&name, line)),
                None => {
                    held = end;
                    continue;
                }
            },
        };
        line += scan_declarations(&buf[..whole_lines], line, &name, &finder, names)?;
        if n == 0 {
            return Ok(());
        }
        buf.copy_within(whole_lines..end, 0);
        held = end - whole_lines;
    }
}

/// [`declare_file_tables`] on `text`, whole lines of which the first is line `first`;
/// returns how many lines it holds.
fn scan_declarations(
    text: &[u8],
    first: usize,
    file: &str,
    finder: &memchr::memmem::Finder,
    names: &mut Names,
) -> Result<usize, FlowFileError> {
    let valid_up_to = std::str::from_utf8(text).map_or_else(|e| e.valid_up_to(), |_| text.len());
    let mut declarations = finder.find_iter(text).filter(|&at| {
        let rest = &text[at + "table=".len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        digits > 0 && rest.get(digits) == Some(&b'(')
    });
    let mut next_declaration = declarations.next();
    let ends = memchr::memchr_iter(b'\n', text).chain((text.last() != Some(&b'\n')).then_some(text.len()));
    let (mut start, mut line) = (0, first);
    for end in ends {
        if end - start > MAX_LINE_BYTES {
            return Err(too_long(file, line));
        }
        let with_newline = &text[start..(end + 1).min(text.len())];
        if end > valid_up_to {
            line_text(with_newline, file, line)?;
        }
        if next_declaration.is_some_and(|at| at < end) {
            let body = line_text(with_newline, file, line)?.trim_end_matches(['\n', '\r']);
            declare_tables(names, body, line, file)?;
            next_declaration = declarations.find(|&at| at > end);
        }
        start = end + 1;
        line += 1;
    }
    Ok(line - first)
}

/// Where the clauses of each conjunction are, to point out conjunctions that can never
/// match: a clause no flow provides at the conjunction's priority, or clause counts that
/// disagree. Open vSwitch installs such flows silently (they only make packets fall
/// through), so these are warnings, not errors.
#[derive(Default)]
struct Clauses {
    /// The clause flows in force, by (table, match, priority), as a later identical rule
    /// replaces an earlier one.
    flows: std::collections::HashMap<(u8, Match, u16), ClauseFlow>,
}

/// Where a clause flow is, and what it is a clause of.
struct ClauseFlow {
    line: usize,
    column: usize,
    conjunctions: Vec<Conjunction>,
}

/// One conjunction (in a table, at a priority) as its flows describe it.
struct Tally {
    n_clauses: u8,
    /// Bit k set once clause k was seen.
    seen: u64,
    /// Its first flow's line and column.
    at: (usize, usize),
}

impl Clauses {
    fn note(&mut self, rule: &Rule, line: &str, number: usize) {
        let conj = conjunctions(&rule.actions);
        if conj.is_empty() && self.flows.is_empty() {
            return;
        }
        let key = (rule.table, rule.matcher(), rule.priority);
        if conj.is_empty() {
            self.flows.remove(&key);
        } else {
            let column = line.find("conjunction").map_or(1, |c| c + 1);
            self.flows.insert(key, ClauseFlow { line: number, column, conjunctions: conj });
        }
    }

    fn problems(&self, file: &str) -> Vec<FlowFileError> {
        let mut out = Vec::new();
        let mut by_id: BTreeMap<(u8, u32, u16), Tally> = BTreeMap::new();
        let mut in_order: Vec<_> = self.flows.iter().collect();
        in_order.sort_by_key(|(_, f)| (f.line, f.column));
        for (&(table, _, priority), f) in in_order {
            let (line, column) = (f.line, f.column);
            for c in &f.conjunctions {
                let t = by_id.entry((table, c.id, priority)).or_insert(Tally {
                    n_clauses: c.n_clauses,
                    seen: 0,
                    at: (line, column),
                });
                if t.n_clauses != c.n_clauses {
                    out.push(FlowFileError::at(
                        file,
                        line,
                        column,
                        &format!("conjunction({},{}/{})", c.id, c.clause + 1, c.n_clauses),
                        format!(
                            "conjunction {} has {} clauses here but {} at line {} (same table and priority)",
                            c.id, c.n_clauses, t.n_clauses, t.at.0
                        ),
                    ));
                    continue;
                }
                t.seen |= 1 << c.clause;
            }
        }
        for (&(table, id, priority), t) in &by_id {
            let (n, (line, column)) = (t.n_clauses, t.at);
            let missing: Vec<String> =
                (0..n).filter(|k| t.seen & (1 << k) == 0).map(|k| (k + 1).to_string()).collect();
            if !missing.is_empty() {
                out.push(FlowFileError::at(
                    file,
                    line,
                    column,
                    &format!("conjunction({id},"),
                    format!(
                        "conjunction {id} in table {table} at priority {priority} never matches: no flow is its \
                         clause {} of {n} (every clause must be at the same priority)",
                        missing.join(", ")
                    ),
                ));
            }
        }
        out
    }
}

/// A file holding given bytes in the system's temporary directory, removed when dropped: for
/// the tests of the readers of flow, name and group files.
#[cfg(test)]
pub(crate) struct TempFile(pub(crate) std::path::PathBuf);

#[cfg(test)]
impl TempFile {
    pub(crate) fn holding(bytes: &[u8]) -> TempFile {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("hyflow-test-file-{}-{n}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        TempFile(p)
    }
}

#[cfg(test)]
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write(bytes: &[u8]) -> TempFile {
        TempFile::holding(bytes)
    }

    /// The file read as its definition says, one line at a time: every line checked and its
    /// declarations made in a first pass, every line parsed in a second.
    fn line_by_line(bytes: &[u8]) -> Result<(Vec<Rule>, Names), FlowFileError> {
        let mut lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
        lines.retain(|l| !l.is_empty());
        let mut names = Names::new();
        for (i, line) in lines.iter().enumerate() {
            let text = line_text(line, "f", i + 1)?;
            declare_tables(&mut names, text.trim_end_matches(['\n', '\r']), i + 1, "f")?;
        }
        let mut rules = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let text = std::str::from_utf8(line).unwrap().trim_end_matches(['\n', '\r']);
            rules.extend(parse_flow_line(text, i + 1, "f", &names)?);
        }
        Ok((rules, names))
    }

    /// Lines a generated file is made of: rules, names used before and after they are
    /// declared, comments, blank and CRLF lines, bad rules and bad declarations, a line that
    /// is not UTF-8.
    const LINES: &[&[u8]] = &[
        b"priority=5,ip,nw_dst=10.0.0.1,actions=output:2\n",
        b"table=1,priority=7,tcp,tp_dst=80,actions=output:3\n",
        b"table=Egress,priority=1,actions=drop\n",
        b"table=4(Egress),priority=9,in_port=3,actions=resubmit(,Egress)\n",
        b"priority=5,ip,nw_dst=10.0.0.1,actions=output:4\r\n",
        b"# table=6(Commented) is not a declaration\n",
        b"\n",
        b"ip,nw_dst=1.2.3.4/99 actions=drop\n",
        b"table=300(Big),actions=drop\n",
        b"ip,nw_src=10.\xff.0.1,actions=drop\n",
        b"actions=output:1",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Whatever the batches and threads, the rules and the first error are those of a
        /// line-by-line read.
        #[test]
        fn batched_parse_reads_as_line_by_line(
            picks in prop::collection::vec(prop::sample::select((0..LINES.len()).collect::<Vec<_>>()), 0..40),
            bad in prop::sample::select(vec![0usize, 1, 4]),
            batch_lines in 1usize..6,
        ) {
            // Bad lines are rarer than good ones: most files load.
            let picks: Vec<usize> = picks.into_iter().filter(|&p| p < 7 || p % 5 < bad).collect();
            let bytes: Vec<u8> = picks.iter().flat_map(|&p| LINES[p].iter().copied()).collect();
            let file = write(&bytes);
            let mut names = Names::new();
            let mut rules = Vec::new();
            let got = stream_in_batches(&file.0, &mut names, |r| rules.push(r), batch_lines);
            let file_name = file.0.display().to_string();
            match line_by_line(&bytes) {
                Ok((want, want_names)) => {
                    prop_assert!(got.is_ok(), "{:?}", got);
                    prop_assert_eq!(rules, want);
                    prop_assert_eq!(names.table("Egress"), want_names.table("Egress"));
                }
                Err(want) => {
                    let got = got.expect_err("an error");
                    prop_assert_eq!(FlowFileError { file: "f".into(), ..got }, FlowFileError { file: "f".into(), ..want });
                    let _ = file_name;
                }
            }
        }
    }

    #[test]
    fn warnings_look_across_batches() {
        let text = "priority=5,ip,actions=conjunction(1,1/2)\n\
                    priority=5,tcp,actions=output:2\n\
                    priority=5,arp,actions=meter:1,output:3\n\
                    priority=5,udp,actions=conjunction(1,2/2)\n\
                    priority=6,udp,actions=conjunction(2,2/2)\n";
        let file = write(text.as_bytes());
        for batch_lines in [1, 2, 100] {
            let mut n = 0;
            let warnings = stream_in_batches(&file.0, &mut Names::new(), |_| n += 1, batch_lines).unwrap();
            assert_eq!(n, 5);
            let seen: Vec<_> =
                warnings.iter().map(|w| (w.line, w.message.split(':').next().unwrap().to_string())).collect();
            assert_eq!(seen.len(), 2, "{seen:?}");
            assert_eq!(seen[0].0, 5, "conjunction 2 lacks its clause 1: {seen:?}");
            assert_eq!(seen[1], (3, "1 flow(s) use meters".to_string()));
        }
    }

    #[test]
    fn the_scan_reports_what_the_line_by_line_read_does() {
        let long =
            format!("priority=1,actions=drop\n#{}\ntable=1(T),actions=drop\n", "x".repeat(MAX_LINE_BYTES));
        let file = write(long.as_bytes());
        let e = read_flow_file(&file.0).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (2, "line longer than 1048576 bytes"));
        // Just short enough, and a last line without its newline.
        let fits = format!("#{}\ntable=1(T),actions=drop", "x".repeat(MAX_LINE_BYTES - 1));
        let file = write(fits.as_bytes());
        let mut names = Names::new();
        assert_eq!(read_flow_file_named(&file.0, &mut names).unwrap().len(), 1);
        assert_eq!(names.table("T"), Some(1));
        let e = read_flow_file(Path::new("/nonexistent/hyflow.flows")).unwrap_err();
        assert_eq!(e.line, 0);
        assert!(e.message.starts_with("cannot read"), "{}", e.message);
    }
}
