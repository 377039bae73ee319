//! `--scale-report DIR` (issue 5 item 4): the table and the plot of a
//! scaling sweep. scripts/scale.sh runs one bench per point and leaves its
//! JSON in DIR as `<axis>-<value>.json` (axis `sessions`, `nodes` or
//! `shards`); this reads every such file, prints one row per (point,
//! system, run) with p50, p99 and messages/s, and writes `DIR/scale.svg`:
//! p99 and throughput against each axis, one line per system.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

/// The axes the sweep varies, in the order the plot shows them.
const AXES: [&str; 3] = ["sessions", "nodes", "shards"];

/// One system's figures at one point of the sweep.
#[derive(Clone, Debug, PartialEq)]
struct Point {
    axis: &'static str,
    value: f64,
    system: String,
    p50_us: f64,
    p99_us: f64,
    messages_per_second: f64,
}

/// The axis and value a point's file name carries: `sessions-1000.json`.
fn point_of(name: &str) -> Option<(&'static str, f64)> {
    let stem = name.strip_suffix(".json")?;
    let (axis, value) = stem.rsplit_once('-')?;
    let axis = AXES.into_iter().find(|a| *a == axis)?;
    Some((axis, value.parse().ok()?))
}

/// Every system of every run in one bench JSON (`{"runs": [{"systems": ..}]}`).
fn points(axis: &'static str, value: f64, report: &serde_json::Value) -> Vec<Point> {
    let runs = report["runs"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    runs.iter()
        .flat_map(|run| run["systems"].as_array().map(Vec::as_slice).unwrap_or(&[]))
        .map(|s| Point {
            axis,
            value,
            system: s["system"].as_str().unwrap_or("?").to_owned(),
            p50_us: s["latency_us"]["p50"].as_f64().unwrap_or(0.0),
            p99_us: s["latency_us"]["p99"].as_f64().unwrap_or(0.0),
            messages_per_second: s["messages_per_second"].as_f64().unwrap_or(0.0),
        })
        .collect()
}

/// Reads the sweep in `dir`, prints its table and writes `scale.svg`.
pub fn report(dir: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    let mut all = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .path();
        let Some((axis, value)) = path.file_name().and_then(|n| n.to_str()).and_then(point_of)
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let report: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        all.extend(points(axis, value, &report));
    }
    if all.is_empty() {
        return Err(format!(
            "no sweep points (<axis>-<value>.json) in {}",
            dir.display()
        ));
    }
    all.sort_by(|a, b| {
        let rank = |p: &Point| AXES.iter().position(|x| *x == p.axis);
        (rank(a), a.value, &a.system)
            .partial_cmp(&(rank(b), b.value, &b.system))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    print!("{}", table(&all));
    let svg = dir.join("scale.svg");
    plot(&svg, &all)?;
    println!("plot: {}", svg.display());
    Ok(())
}

fn table(all: &[Point]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<18} {:<12} {:>10} {:>10} {:>12}",
        "point", "system", "p50_us", "p99_us", "msg_per_s"
    );
    for p in all {
        let point = format!("{}={}", p.axis, p.value);
        let _ = writeln!(
            out,
            "{point:<18} {:<12} {:>10.1} {:>10.1} {:>12.0}",
            p.system, p.p50_us, p.p99_us, p.messages_per_second
        );
    }
    out
}

/// One panel per (axis, metric): rows are the axes present, columns p99
/// and msg/s. Sessions go on a log10 axis (100 → 10k).
fn plot(path: &Path, all: &[Point]) -> Result<(), String> {
    let axes: Vec<&str> = AXES
        .into_iter()
        .filter(|a| all.iter().any(|p| p.axis == *a))
        .collect();
    let fail = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    let height = 300 * axes.len() as u32;
    let root = SVGBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let panels = root.split_evenly((axes.len(), 2));
    let systems: Vec<&str> = {
        let mut s: Vec<&str> = all.iter().map(|p| p.system.as_str()).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    for (row, axis) in axes.iter().enumerate() {
        let log_x = *axis == "sessions";
        let x_of = |v: f64| if log_x { v.max(1.0).log10() } else { v };
        let here: Vec<&Point> = all.iter().filter(|p| p.axis == *axis).collect();
        let x_min = here.iter().map(|p| x_of(p.value)).fold(f64::MAX, f64::min);
        let x_max = here.iter().map(|p| x_of(p.value)).fold(f64::MIN, f64::max);
        let pad = ((x_max - x_min) * 0.05).max(0.1);
        type Metric = (&'static str, fn(&Point) -> f64);
        let metrics: [Metric; 2] = [
            ("p99 latency µs", |p| p.p99_us),
            ("messages/s", |p| p.messages_per_second),
        ];
        for (col, (label, metric)) in metrics.into_iter().enumerate() {
            let y_max = here.iter().map(|p| metric(p)).fold(1.0_f64, f64::max) * 1.15;
            let area = &panels[row * 2 + col];
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{label} by {axis}"), ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(70)
                .build_cartesian_2d((x_min - pad)..(x_max + pad), 0.0..y_max)
                .map_err(|e| fail(&e))?;
            let x_label = |x: &f64| {
                if log_x {
                    format!("{:.0}", 10f64.powf(*x))
                } else {
                    format!("{x:.0}")
                }
            };
            chart
                .configure_mesh()
                .x_desc(*axis)
                .y_desc(label)
                .x_label_formatter(&x_label)
                .draw()
                .map_err(|e| fail(&e))?;
            for (i, system) in systems.iter().enumerate() {
                let line: Vec<(f64, f64)> = here
                    .iter()
                    .filter(|p| p.system == *system)
                    .map(|p| (x_of(p.value), metric(p)))
                    .collect();
                if line.is_empty() {
                    continue;
                }
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                    .map_err(|e| fail(&e))?
                    .label(*system)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| fail(&e))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| fail(&e))?;
        }
    }
    root.present().map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_file_names_its_axis_and_value() {
        assert_eq!(point_of("sessions-1000.json"), Some(("sessions", 1000.0)));
        assert_eq!(point_of("shards-2.json"), Some(("shards", 2.0)));
        assert_eq!(point_of("report.json"), None);
        assert_eq!(point_of("cores-2.json"), None);
        assert_eq!(point_of("nodes-x.json"), None);
    }

    #[test]
    fn every_run_of_a_report_is_read() {
        let report = serde_json::json!({ "runs": [
            { "systems": [{ "system": "zlink", "latency_us": { "p50": 1.0, "p99": 2.0 },
                            "messages_per_second": 3.0 }] },
            { "systems": [{ "system": "tokio", "latency_us": { "p50": 4.0, "p99": 5.0 },
                            "messages_per_second": 6.0 }] },
        ]});
        let read = points("nodes", 3.0, &report);
        assert_eq!(read.len(), 2);
        assert_eq!(read[1].system, "tokio");
        assert_eq!(read[1].p99_us, 5.0);
    }
}
