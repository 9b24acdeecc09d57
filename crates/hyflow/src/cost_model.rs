//! What software packet processing costs: the service times a simulated host core spends.
//!
//! A [`CostModel`] holds one figure per kind of work, in nanoseconds on one core. `hyflow
//! calibrate` measures them on the machine it runs on
//! ([`crate::experiment::calibrate`]); a file written by it
//! (or by hand, e.g. to model a slower DPU core) is loaded with [`CostModel::from_json`];
//! [`CostModel::default`] is a calibration run recorded in `BENCHMARKS.md`.

use serde::{Deserialize, Serialize};

use crate::switch::Layer;

/// Nanoseconds of one core per unit of work.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, from = "CostsFile")]
pub struct CostModel {
    /// Receiving a packet from the ring and parsing it: paid by every software packet.
    pub rx_ns: f64,
    /// A microflow (exact-match) cache hit.
    pub microflow_hit_ns: f64,
    /// A megaflow cache hit (and the microflow insert it triggers).
    pub megaflow_hit_ns: f64,
    /// An upcall: slow-path translation and the megaflow and microflow installs (calibrated
    /// without a NIC: offloading a megaflow as it is costs about what the software install
    /// does, and is not charged apart).
    pub upcall_ns: f64,
    /// Measurement work per sampled packet (a sketch update). A sampled header costs the host
    /// this alone: the NIC delivers it truncated, in batches, and the update reads its flow
    /// key directly.
    pub sample_ns: f64,
    /// What an upcall offered to a Gigaflow NIC adds: walking the traversal through the
    /// stages, partitioning it and generating the sub-traversal entries.
    pub gigaflow_install_ns: f64,
    /// Writing one entry into the NIC's table, or taking one out: the host's side of the
    /// driver call (a BPF map update per table for the live XDP tier, a tc flower or rte_flow
    /// call on a SmartNIC), on top of computing the entry. 0 in the built-in model (the
    /// engine alone); `hyflow calibrate --live` measures it on the XDP tier.
    pub nic_write_ns: f64,
}

/// A costs file as written: `gigaflow_install_ns` may be missing (files from before it was
/// measured, hand-written ones), and is then scaled from `upcall_ns` by the built-in
/// calibration's ratio, so a file describing a slower host stays consistent; a missing
/// `nic_write_ns` is 0, as the built-in model's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CostsFile {
    rx_ns: f64,
    microflow_hit_ns: f64,
    megaflow_hit_ns: f64,
    upcall_ns: f64,
    sample_ns: f64,
    gigaflow_install_ns: Option<f64>,
    nic_write_ns: Option<f64>,
}

impl From<CostsFile> for CostModel {
    fn from(f: CostsFile) -> CostModel {
        let builtin = CostModel::default();
        let scaled = f.upcall_ns * builtin.gigaflow_install_ns / builtin.upcall_ns;
        CostModel {
            rx_ns: f.rx_ns,
            microflow_hit_ns: f.microflow_hit_ns,
            megaflow_hit_ns: f.megaflow_hit_ns,
            upcall_ns: f.upcall_ns,
            sample_ns: f.sample_ns,
            gigaflow_install_ns: f.gigaflow_install_ns.unwrap_or(scaled),
            nic_write_ns: f.nic_write_ns.unwrap_or(0.0),
        }
    }
}

impl Default for CostModel {
    /// `hyflow calibrate` on the 2-vCPU AMD EPYC VM of `BENCHMARKS.md` (built-in workload;
    /// the median of three runs on 2026-11-23). `gigaflow_install_ns` was measured later, on
    /// a busier host that put upcalls at 1,400–1,500 ns: it is 1.23 × `upcall_ns` here, the
    /// median ratio of those three runs.
    fn default() -> Self {
        CostModel {
            rx_ns: 92.6,
            microflow_hit_ns: 36.1,
            megaflow_hit_ns: 73.3,
            upcall_ns: 781.4,
            sample_ns: 27.4,
            gigaflow_install_ns: 960.0,
            nic_write_ns: 0.0,
        }
    }
}

/// Why a costs file is refused.
#[derive(Debug, thiserror::Error)]
pub enum CostsError {
    /// Not JSON, a missing or unknown entry, or a value that is not a number.
    #[error("{0}")]
    Parse(String),
    /// A negative or non-finite figure.
    #[error("cost '{0}' must be a finite number ≥ 0, not {1}")]
    Invalid(&'static str, f64),
}

impl CostModel {
    /// The figures with their names.
    pub fn entries(&self) -> [(&'static str, f64); 7] {
        [
            ("rx_ns", self.rx_ns),
            ("microflow_hit_ns", self.microflow_hit_ns),
            ("megaflow_hit_ns", self.megaflow_hit_ns),
            ("upcall_ns", self.upcall_ns),
            ("sample_ns", self.sample_ns),
            ("gigaflow_install_ns", self.gigaflow_install_ns),
            ("nic_write_ns", self.nic_write_ns),
        ]
    }

    /// Parses and checks a costs file (every entry required, none unknown, all ≥ 0).
    pub fn from_json(text: &str) -> Result<CostModel, CostsError> {
        let m: CostModel = serde_json::from_str(text).map_err(|e| CostsError::Parse(e.to_string()))?;
        m.check()?;
        Ok(m)
    }

    /// Checks every figure is finite and ≥ 0.
    pub fn check(&self) -> Result<(), CostsError> {
        for (name, v) in self.entries() {
            if !(v.is_finite() && v >= 0.0) {
                return Err(CostsError::Invalid(name, v));
            }
        }
        Ok(())
    }

    /// Service time of a packet the host handled at `layer` (ns, rounded).
    #[inline]
    pub(crate) fn service_ns(&self, layer: Layer) -> u64 {
        let work = match layer {
            Layer::Microflow => self.microflow_hit_ns,
            Layer::Megaflow => self.megaflow_hit_ns,
            Layer::SlowPath => self.upcall_ns,
            Layer::Nic => 0.0,
        };
        (self.rx_ns + work).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_files_must_be_complete_and_non_negative() {
        let ok = r#"{"rx_ns": 50, "microflow_hit_ns": 100, "megaflow_hit_ns": 200, "upcall_ns": 8000, "sample_ns": 30}"#;
        assert_eq!(CostModel::from_json(ok).unwrap().service_ns(Layer::Megaflow), 250);
        let missing = r#"{"rx_ns": 50, "microflow_hit_ns": 100, "megaflow_hit_ns": 200, "sample_ns": 30}"#;
        assert!(CostModel::from_json(missing).unwrap_err().to_string().contains("missing field `upcall_ns`"));
        let negative = ok.replace("\"upcall_ns\": 8000", "\"upcall_ns\": -1");
        assert!(CostModel::from_json(&negative).unwrap_err().to_string().contains("'upcall_ns' must be"));
        let unknown = ok.replace("\"sample_ns\"", "\"samples_ns\"");
        assert!(CostModel::from_json(&unknown).is_err());
        // Without Gigaflow's install cost: scaled from upcall_ns as the built-in model is.
        let builtin = CostModel::default();
        let scaled = CostModel::from_json(ok).unwrap().gigaflow_install_ns;
        assert!((scaled - 8000.0 * builtin.gigaflow_install_ns / builtin.upcall_ns).abs() < 1e-9);
        let given = ok.replace("\"sample_ns\": 30", "\"sample_ns\": 30, \"gigaflow_install_ns\": 5");
        assert_eq!(CostModel::from_json(&given).unwrap().gigaflow_install_ns, 5.0);
        let round_trip = serde_json::to_string(&builtin).unwrap();
        assert_eq!(CostModel::from_json(&round_trip).unwrap(), builtin);
        assert!(CostModel::default().check().is_ok());
    }
}
