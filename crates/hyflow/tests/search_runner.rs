//! Capacity searches whose probes run elsewhere (Ray tasks, through a [`ProbeRunner`]) answer
//! exactly as searches on this process's threads: the same summary, loss by cores and rate,
//! whatever the runner's width and the order it runs a batch in; a probe's error is the
//! search's error where the sequential search needs that probe.

use std::sync::Mutex;

use hyflow::experiment::sim::{probe, search, Probe, ProbeRunner, Search, SimExperiment};
use hyflow::experiment::{ExperimentError, Workload};
use hyflow::timing::search::CoreLoss;

/// Runs every probe with [`probe`] as a remote task would, last first, and logs the batches.
struct Direct<'a> {
    workload: &'a Workload,
    exp: &'a SimExperiment,
    width: usize,
    /// Probes that fail, as a task whose worker could not run them.
    failing: Vec<Probe>,
    batches: Mutex<Vec<Vec<Probe>>>,
}

impl ProbeRunner for Direct<'_> {
    fn width(&self) -> usize {
        self.width
    }

    fn run(&self, probes: &[Probe]) -> Vec<Result<CoreLoss, ExperimentError>> {
        self.batches.lock().unwrap().push(probes.to_vec());
        let mut out: Vec<_> = probes
            .iter()
            .rev()
            .map(|&p| match self.failing.contains(&p) {
                true => Err(ExperimentError::Remote(format!("no worker for {} cores", p.cores))),
                false => probe(self.workload, self.exp, p),
            })
            .collect();
        out.reverse();
        out
    }
}

fn experiment(cores: usize, rate_pps: Option<f64>) -> SimExperiment {
    let mut exp = SimExperiment { rate_pps, search_threads: 1, ..Default::default() };
    exp.machine.cores = cores;
    exp
}

fn runner<'a>(
    workload: &'a Workload,
    exp: &'a SimExperiment,
    width: usize,
    failing: Vec<Probe>,
) -> Direct<'a> {
    Direct { workload, exp, width, failing, batches: Mutex::new(Vec::new()) }
}

#[test]
fn a_min_cores_search_on_a_runner_answers_as_on_threads() {
    let workload = Workload::builtin(None);
    // A rate that makes one core lose and the bound not (the built-in trace is then 10 ms long).
    let exp = experiment(1, Some(20_000_000.0));
    let what = Search::MinCores { max_cores: 4, tolerance: 0.001 };
    let local = search(&workload, &exp, what, &|| true, None).unwrap();
    let direct = runner(&workload, &exp, 2, Vec::new());
    let remote = search(&workload, &exp, what, &|| true, Some(&direct)).unwrap();
    assert_eq!(local.summary, remote.summary);
    assert_eq!(local.summary.loss_by_cores.len(), 4);
    assert!(local.summary.loss_by_cores[0].lost > 0, "one core must lose for the test to mean something");
    assert!(local.summary.min_cores.is_some());
    // Every count in one batch, each at the search's rate.
    let batches = direct.batches.lock().unwrap();
    let all: Vec<Probe> = (1..=4).map(|cores| Probe { cores, rate_pps: Some(20_000_000.0) }).collect();
    assert_eq!(*batches, vec![all]);
}

#[test]
fn a_max_rate_search_on_a_runner_answers_as_on_threads_at_any_width() {
    let workload = Workload::builtin(None);
    let exp = experiment(2, None);
    let local = search(&workload, &exp, Search::MaxRate, &|| true, None).unwrap();
    let answer = local.summary.max_rate_pps.expect("a rate");
    for width in [1, 3] {
        let direct = runner(&workload, &exp, width, Vec::new());
        let remote = search(&workload, &exp, Search::MaxRate, &|| true, Some(&direct)).unwrap();
        assert_eq!(local.summary, remote.summary, "width {width}");
        let batches = direct.batches.lock().unwrap();
        assert!(batches.iter().all(|b| !b.is_empty() && b.len() <= width), "width {width}: {batches:?}");
        // The answer is a rate one of the batches ran.
        assert!(batches.iter().flatten().any(|p| p.rate_pps == Some(answer)));
    }
}

#[test]
fn a_failed_probe_is_the_search_error_only_where_the_search_needs_it() {
    let workload = Workload::builtin(None);
    let exp = experiment(1, Some(20_000_000.0));
    let what = Search::MinCores { max_cores: 3, tolerance: 0.001 };
    let failing = vec![Probe { cores: 2, rate_pps: Some(20_000_000.0) }];
    let direct = runner(&workload, &exp, 2, failing);
    match search(&workload, &exp, what, &|| true, Some(&direct)) {
        Err(ExperimentError::Remote(m)) => assert_eq!(m, "no worker for 2 cores"),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a sweep needs every count"),
    }
    // A max-rate search speculating 3 wide: a failure on a rate it never needs is ignored.
    let exp = experiment(2, None);
    let local = search(&workload, &exp, Search::MaxRate, &|| true, None).unwrap();
    let probe_rates = {
        let direct = runner(&workload, &exp, 3, Vec::new());
        search(&workload, &exp, Search::MaxRate, &|| true, Some(&direct)).unwrap();
        let b = direct.batches.lock().unwrap();
        b.iter().flatten().map(|p| p.rate_pps.unwrap()).collect::<Vec<_>>()
    };
    // The sequential probes: those of a width-1 search.
    let needed: Vec<f64> = {
        let direct = runner(&workload, &exp, 1, Vec::new());
        search(&workload, &exp, Search::MaxRate, &|| true, Some(&direct)).unwrap();
        let b = direct.batches.lock().unwrap();
        b.iter().flatten().map(|p| p.rate_pps.unwrap()).collect()
    };
    let unneeded =
        probe_rates.iter().find(|r| !needed.contains(r)).copied().expect("some speculation was wasted");
    let failing = vec![Probe { cores: 2, rate_pps: Some(unneeded) }];
    let direct = runner(&workload, &exp, 3, failing);
    let remote = search(&workload, &exp, Search::MaxRate, &|| true, Some(&direct)).unwrap();
    assert_eq!(local.summary, remote.summary);
    let failing = vec![Probe { cores: 2, rate_pps: Some(needed[1]) }];
    let direct = runner(&workload, &exp, 3, failing);
    assert!(matches!(
        search(&workload, &exp, Search::MaxRate, &|| true, Some(&direct)),
        Err(ExperimentError::Remote(_))
    ));
}
