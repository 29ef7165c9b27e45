//! What a tuning campaign reads back: its manifest (`--resume` and every
//! Slurm task open it), the result files its tasks store (the search scores
//! them), and the evaluation log (`--format t4` is written from it).

use config::Config;
use tune::campaign::TaskResult;
use tune::{Campaign, CampaignObjective, Executor, Space, Tuner};

/// `campaign.json`: opened as `--resume` and a task open it; what opens
/// survives the writer.
pub fn campaign_manifest(data: &[u8]) -> bool {
    let dir = crate::fixtures::fresh_dir("campaign-manifest");
    std::fs::write(dir.join("campaign.json"), data).expect("scratch write");
    let Ok((_, manifest)) = Campaign::open(&dir) else {
        return false;
    };
    let again = crate::fixtures::fresh_dir("campaign-manifest-again");
    Campaign::create(&again, &manifest).expect("a campaign is created in an empty directory");
    let (_, back) = Campaign::open(&again).expect("a campaign tdg created opens");
    assert_eq!(back, manifest);
    true
}

/// The tasks of a round: each configuration without a stored result gets
/// a good one, as a node that timed it would store.
struct GoodTasks;

impl Executor for GoodTasks {
    fn run(&mut self, campaign: &Campaign, configs: &[Config]) -> Result<(), tune::TuneError> {
        for config in configs {
            campaign.store(&TaskResult {
                config: config.clone(),
                time_ns: Some(1000.0),
                mflops: Some(2.0),
                error: None,
                failure: None,
                samples_ns: vec![1000.0, 1001.0],
                uncertainty_pct: Some(0.1),
                node: "node1".into(),
                cpu: String::new(),
                seconds: 1.0,
                job: None,
                inputs: String::new(),
            })?;
        }
        Ok(())
    }
}

/// A stored result scored by the search as `--resume` scores it: an
/// exhaustive search over NB in {16, 32} and MU in {0, 1, 2}, the other
/// configurations timed by tasks, with its evaluation log, which then reads
/// back as the T4 document is written from it. The file lies where the
/// campaign keeps the result of the configuration it names (else of
/// NB=32 MU=2). Accepted when the search scored the stored result (a time
/// or a failure) rather than evaluating that configuration again.
pub fn campaign_result(data: &[u8]) -> bool {
    let dir = crate::fixtures::fresh_dir("campaign-result");
    // No inputs: the seeds' results carry this manifest's digest
    // (`Manifest::inputs_digest`), as results the campaign stored do.
    let manifest = tune::Manifest::new("/".into(), vec!["tune".into()], Vec::new());
    let campaign = Campaign::create(&dir, &manifest).expect("a campaign in a fresh directory");
    let space = Space::new(vec![
        tune::parse_param("NB=16:32:16").expect("a range"),
        tune::parse_param("MU=0:2").expect("a range"),
    ])
    .expect("a space");
    let named = serde_json::from_slice::<TaskResult>(data)
        .ok()
        .map(|r| r.config)
        .filter(|c| space.point_of(c).is_some());
    let stored = named
        .unwrap_or_else(|| Config::from_pairs([("NB", 32), ("MU", 2)]).expect("a configuration"));
    std::fs::write(
        dir.join("results")
            .join(format!("{}.json", stored.file_stem())),
        data,
    )
    .expect("scratch write");
    let mut executor = GoodTasks;
    let mut objective = CampaignObjective::new(&campaign, &mut executor, false);
    let mut log: Vec<u8> = Vec::new();
    let outcome = Tuner::new(
        &space,
        &mut objective,
        &mut (),
        Some(Box::new(&mut log)),
        10,
    )
    .exhaustive();
    drop(objective);
    if outcome.is_ok() {
        assert!(tune_log(&log), "the search's own log reads back");
    }
    // A result the campaign cannot read counts as missing: a task evaluates
    // the configuration again and its result replaces the file.
    let text = String::from_utf8_lossy(&log);
    text.lines()
        .filter_map(|l| serde_json::from_str::<tune::Evaluation>(l).ok())
        .any(|e| e.config == stored && e.node.as_deref() != Some("node1"))
}

/// An evaluation log, one JSON line per configuration: read as
/// `tdg tune --format t4` reads it (`tune::run::read_log`), and written as
/// the T4 document.
pub fn tune_log(data: &[u8]) -> bool {
    let path = crate::fixtures::fresh_dir("tune-log").join("tune.jsonl");
    std::fs::write(&path, data).expect("scratch write");
    let Ok(evaluations) = tune::run::read_log(&path) else {
        return false;
    };
    let tried = formats::t4::from_evaluations(evaluations, 1.7e9);
    let doc = formats::t4::document(&tried);
    serde_json::to_string(&doc).expect("a T4 document serialises");
    true
}
