//! This host's per-packet costs, fitted from the live switch's own rounds (`hyflow calibrate
//! --live`): what `sim` needs to price software the way this switch really spends it.
//!
//! `hyflow calibrate` times the engine alone on a built-in workload; a live core also receives
//! each frame from its AF_XDP ring, copies it out, rewrites it and sends it, and flushes per
//! round. Every round that received frames is a sample: its processing time (the time the core
//! counts in `show`, less the time it waited for the engine's lock) against how many of its
//! frames each layer decided. A least-squares fit of time = round + Σ frames(layer) ×
//! cost(layer) over all rounds gives a round's fixed cost (polling every queue, flushing every
//! port) and each layer's whole cost per frame, I/O included. `sim` prices frames only, so the
//! round's cost is spread over a full batch (64 frames: a saturated core's rounds, where loss
//! is decided) and added to every frame; the costs file splits the result into `sim`'s
//! receive part and the layer's part in the built-in calibration's ratio, so that receive +
//! layer is that figure. A layer no round saw is scaled from the built-in
//! calibration by the microflow layer's ratio. A recirculated pass (conntrack pipelines) is
//! not counted apart: its cost lands in its frame's first layer.

use serde::Serialize;

use hyflow::cost_model::CostModel;

use crate::port_io::BATCH;

/// The sums of a least-squares fit over rounds (the normal equations), mergeable across
/// cores. Unknowns in the order round, microflow, megaflow, upcall.
#[derive(Clone, Copy, Debug, Default)]
pub struct CostFit {
    /// Σ x xᵀ over rounds, x = (1, frames per layer).
    xx: [[f64; 4]; 4],
    /// Σ x · time (its first element Σ time; `xx`'s first row the rounds and the frames per
    /// layer).
    xy: [f64; 4],
    /// Σ time².
    yy: f64,
}

/// What the fit found.
#[derive(Clone, Debug, Serialize)]
pub struct FittedCosts {
    /// Rounds fitted.
    pub rounds: u64,
    /// Frames per layer (microflow, megaflow, upcall).
    pub frames: [u64; 3],
    /// A round's fixed cost, ns.
    pub per_round_ns: f64,
    /// Whole cost per frame of each layer, the round's cost left out, ns (`None`: no round
    /// saw the layer).
    pub per_frame_ns: [Option<f64>; 3],
    /// Share of the rounds' time variance the fit explains.
    pub r_squared: f64,
    /// The policy's time per sampled header, its hook and the changes it made included, ns
    /// (with a policy that samples). Not the cost model's `sample_ns`: `sim` charges that per
    /// header and the policy's own work on top.
    pub policy_sample_hook_ns: Option<f64>,
    /// The cost model for `sim --costs`.
    pub cost_model: CostModel,
}

impl CostFit {
    /// A round of `frames` frames per layer that took `ns`.
    pub fn add(&mut self, frames: [u32; 3], ns: u64) {
        let x = [1.0, frames[0] as f64, frames[1] as f64, frames[2] as f64];
        let y = ns as f64;
        for i in 0..4 {
            for j in 0..4 {
                self.xx[i][j] += x[i] * x[j];
            }
            self.xy[i] += x[i] * y;
        }
        self.yy += y * y;
    }

    /// Adds another core's sums.
    pub fn merge(&mut self, o: &CostFit) {
        for i in 0..4 {
            for j in 0..4 {
                self.xx[i][j] += o.xx[i][j];
            }
            self.xy[i] += o.xy[i];
        }
        self.yy += o.yy;
    }

    /// Rounds added.
    fn rounds(&self) -> u64 {
        self.xx[0][0] as u64
    }

    /// Frames per layer over all rounds.
    fn frames(&self) -> [u64; 3] {
        [1, 2, 3].map(|i| self.xx[0][i] as u64)
    }

    /// The fitted costs, with the policy's time per sampled header if there is one and the
    /// NIC tier's time per table write (measured apart: rounds leave it out); an error if no
    /// round has been seen or the fit fails.
    pub fn fit(
        &self,
        policy_sample_hook_ns: Option<f64>,
        nic_write_ns: Option<f64>,
    ) -> Result<FittedCosts, String> {
        let (rounds, frames) = (self.rounds(), self.frames());
        if rounds == 0 {
            return Err(
                "no frame has been forwarded in software yet: send traffic through the switch first".into()
            );
        }
        // The round's cost, and the layers some round saw.
        let unknowns: Vec<usize> = (0..4).filter(|&i| i == 0 || frames[i - 1] > 0).collect();
        let a: Vec<Vec<f64>> =
            unknowns.iter().map(|&i| unknowns.iter().map(|&j| self.xx[i][j]).collect()).collect();
        let b: Vec<f64> = unknowns.iter().map(|&i| self.xy[i]).collect();
        let solved = solve(a, b).ok_or("the rounds do not tell the layers' costs apart (a singular fit)")?;
        let mut beta = [0.0; 4];
        for (k, &i) in unknowns.iter().enumerate() {
            beta[i] = solved[k].max(0.0);
        }
        let per_frame: [Option<f64>; 3] = std::array::from_fn(|i| (frames[i] > 0).then_some(beta[i + 1]));
        // R² = 1 − residual / total, the residual Σ(y − xβ)² expanded over the sums.
        let xb_y: f64 = (0..4).map(|i| beta[i] * self.xy[i]).sum();
        let xb_xb: f64 = (0..4)
            .flat_map(|i| (0..4).map(move |j| (i, j)))
            .map(|(i, j)| beta[i] * beta[j] * self.xx[i][j])
            .sum();
        let residual = (self.yy - 2.0 * xb_y + xb_xb).max(0.0);
        let total = (self.yy - self.xy[0] * self.xy[0] / rounds as f64).max(f64::MIN_POSITIVE);
        let r_squared = (1.0 - residual / total).clamp(0.0, 1.0);
        // At saturation a round carries a full batch: its fixed cost spread over it.
        let at_saturation = per_frame.map(|c| c.map(|c| c + beta[0] / BATCH as f64));
        Ok(FittedCosts {
            rounds,
            frames,
            per_round_ns: beta[0],
            per_frame_ns: per_frame,
            r_squared,
            policy_sample_hook_ns,
            cost_model: CostModel { nic_write_ns: nic_write_ns.unwrap_or(0.0), ..cost_model(at_saturation) },
        })
    }
}

/// Solves `a x = b` (Gaussian elimination with partial pivoting); `None` if singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-9 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (r, row) in lower.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..n].iter_mut().zip(&pivot_row[col..n]) {
                *x -= f * p;
            }
            b[col + 1 + r] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

/// `sim`'s cost model from whole per-frame costs: receive + layer = the fitted figure, split in
/// the built-in calibration's ratio; a layer not fitted scaled from the built-in one.
fn cost_model(per_frame: [Option<f64>; 3]) -> CostModel {
    let b = CostModel::default();
    let builtin = [b.microflow_hit_ns, b.megaflow_hit_ns, b.upcall_ns].map(|l| b.rx_ns + l);
    // How much slower (or faster) this host's live path is than the built-in calibration.
    let scale = (0..3).find_map(|i| per_frame[i].map(|t| t / builtin[i])).unwrap_or(1.0);
    let whole = |i: usize| per_frame[i].unwrap_or(builtin[i] * scale);
    let rx = whole(0) * b.rx_ns / builtin[0];
    let upcall = (whole(2) - rx).max(0.0);
    CostModel {
        rx_ns: rx,
        microflow_hit_ns: (whole(0) - rx).max(0.0),
        megaflow_hit_ns: (whole(1) - rx).max(0.0),
        upcall_ns: upcall,
        // A sketch update is engine work alone: scaled as the frames are.
        sample_ns: b.sample_ns * scale,
        gigaflow_install_ns: upcall * b.gigaflow_install_ns / b.upcall_ns,
        nic_write_ns: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds made from known per-layer costs give those costs back, and the cost model adds
    /// up to them.
    #[test]
    fn the_fit_recovers_known_costs() {
        let (round, costs) = (3_000.0, [900.0, 1_500.0, 20_000.0]);
        let mut fit = CostFit::default();
        let mut seed = 7u64;
        for _ in 0..2_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let frames = [(seed >> 33) as u32 % 64, (seed >> 45) as u32 % 8, (seed >> 55) as u32 % 3];
            let ns: f64 = round + (0..3).map(|i| frames[i] as f64 * costs[i]).sum::<f64>();
            // ±2% noise.
            let noise = 1.0 + ((seed >> 20) % 41) as f64 / 1000.0 - 0.02;
            fit.add(frames, (ns * noise) as u64);
        }
        let f = fit.fit(None, None).unwrap();
        for (got, want) in f.per_frame_ns.iter().zip(costs) {
            let got = got.unwrap();
            assert!((got - want).abs() / want < 0.03, "{got} for {want}");
        }
        assert!((f.per_round_ns - round).abs() / round < 0.2, "round: {}", f.per_round_ns);
        assert!(f.r_squared > 0.98, "{}", f.r_squared);
        // The model's frame: the layer's cost plus the round's over a full batch.
        let m = f.cost_model;
        let spread = f.per_round_ns / BATCH as f64;
        assert!((m.rx_ns + m.microflow_hit_ns - f.per_frame_ns[0].unwrap() - spread).abs() < 1e-6);
        assert!((m.rx_ns + m.upcall_ns - f.per_frame_ns[2].unwrap() - spread).abs() < 1e-6);
        assert!(m.check().is_ok());
    }

    /// A layer no round saw is scaled from the built-in calibration; no round at all is an
    /// error, not a made-up model.
    #[test]
    fn missing_layers_are_scaled_and_no_rounds_is_an_error() {
        assert!(CostFit::default().fit(None, None).is_err());
        let mut fit = CostFit::default();
        for n in 1..100u32 {
            fit.add([n, 0, 0], 640 + n as u64 * 1_000);
        }
        let f = fit.fit(Some(50.0), Some(6_000.0)).unwrap();
        assert_eq!(f.per_frame_ns[1], None);
        let b = CostModel::default();
        let scale = (1_000.0 + 10.0) / (b.rx_ns + b.microflow_hit_ns);
        let m = f.cost_model;
        assert!((m.rx_ns + m.upcall_ns - (b.rx_ns + b.upcall_ns) * scale).abs() < 1e-6);
        assert!((m.sample_ns - b.sample_ns * scale).abs() < 1e-9);
        assert_eq!(f.policy_sample_hook_ns, Some(50.0));
        assert_eq!(f.cost_model.nic_write_ns, 6_000.0);
    }
}
