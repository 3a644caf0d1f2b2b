//! Folding tool calls: the exact log, failure streaks, completions by tool, artifacts.
//! Part of the fold: no I/O, no clock.

use super::*;

impl FoldState {
    // -- tool calls --------------------------------------------------------------

    pub(super) fn fold_tool_call(&mut self, seq: u64, tc: &ToolCall) {
        if self.tool_calls.len() == MAX_TOOL_CALLS {
            self.tool_calls.remove(0);
            self.drop_item("older tool_calls");
        }
        self.tool_calls.push(ToolCallEntry {
            tool_name: tc.tool_name.clone(),
            arguments_json: tc.arguments_json.clone(),
            result_summary: rules::shorten(&tc.result, MAX_RESULT_SUMMARY_CHARS),
            status: tc.status,
            error_details: tc.error_details.clone(),
            seq,
            requires_human_review: false,
        });
        match tc.status {
            ToolCallStatus::Failure | ToolCallStatus::Timeout => {
                self.last_failed_tool = Some(tc.tool_name.clone());
                let run = self.tool_runs.entry(tc.tool_name.clone()).or_default();
                run.failures += 1;
                // Twice in a row with no success since: work is stuck.
                let severity = if run.failures >= 2 {
                    Severity::Blocking
                } else {
                    Severity::Degraded
                };
                let what = if tc.status == ToolCallStatus::Timeout {
                    "timed out"
                } else {
                    "failed"
                };
                let description = if tc.error_details.trim().is_empty() {
                    format!("{} {what}", tc.tool_name)
                } else {
                    format!(
                        "{} {what}: {}",
                        tc.tool_name,
                        rules::clip(&tc.error_details, rules::MAX_ITEM_CHARS)
                    )
                };
                if self.anomalies.len() >= MAX_ANOMALIES {
                    self.drop_item("errors_and_anomalies");
                } else {
                    run.anomaly_indexes.push(self.anomalies.len());
                    self.anomalies.push(Anomaly {
                        description,
                        severity,
                        seq,
                    });
                }
            }
            ToolCallStatus::Success => {
                if let Some(run) = self.tool_runs.remove(&tc.tool_name) {
                    // A success after the failures: they no longer block.
                    for i in run.anomaly_indexes {
                        if let Some(a) = self.anomalies.get_mut(i) {
                            if a.severity == Severity::Blocking {
                                a.severity = Severity::Degraded;
                            }
                        }
                    }
                }
                self.successful_tools.insert(tc.tool_name.clone());
                self.complete_by_tool(seq, tc);
                self.add_artifacts(seq, tc);
            }
            ToolCallStatus::Pending | ToolCallStatus::Unknown => {}
        }
    }

    /// A successful call completes open actions that mention the tool (all
    /// of its name's words) or its object (an identifier of its arguments
    /// or result) together with one of its name's words.
    ///
    /// A tool that only reads (get, search, query…) completes an action only
    /// by name; one that changes things also by one shared verb ("refresh")
    /// or by its object alone ("asset LT-20931", "the vpn-users group"). A
    /// retry promised right after the tool failed is completed by its next
    /// success.
    pub(super) fn complete_by_tool(&mut self, seq: u64, tc: &ToolCall) {
        let parts = tool_words(&tc.tool_name);
        let mutating = !parts.iter().any(|p| READ_VERBS.contains(&p.as_str()));
        let mut objects: Vec<String> = rules::entities(&tc.arguments_json)
            .into_iter()
            .chain(rules::entities(rules::prefix_bytes(
                &tc.result,
                MAX_ANALYSED_BYTES,
            )))
            .filter(|e| !matches!(e.kind, EntityKind::Code | EntityKind::Number))
            .map(|e| e.text.to_lowercase())
            .collect();
        objects.extend(json_strings(&tc.arguments_json));
        let name = tc.tool_name.to_lowercase();
        if self.last_failed_tool.as_deref() == Some(tc.tool_name.as_str()) {
            self.last_failed_tool = None;
        }
        for (i, a) in self.actions.iter_mut().enumerate() {
            if a.status == ActionStatus::Done {
                continue;
            }
            let lower = a.action.to_lowercase();
            let aw = rules::content_words(&a.action);
            let shared = parts.iter().filter(|p| aw.contains(*p)).count();
            let mentions_tool = lower.contains(&name)
                || !parts.is_empty() && shared == parts.len()
                || shared >= 2
                || mutating && shared >= 1;
            let mentions_object =
                objects.iter().any(|o| lower.contains(o.as_str())) && (mutating || shared >= 1);
            let retried = self.action_retries.get(i).and_then(Option::as_deref)
                == Some(tc.tool_name.as_str());
            if mentions_tool || mentions_object || retried {
                a.status = ActionStatus::Done;
                push_seq(&mut a.evidence_seqs, seq);
            }
        }
    }

    /// Identifiers a result names (ids, files, URLs, emails) become
    /// artifacts; a later successful call of the same tool with the same
    /// arguments makes the earlier ones stale.
    pub(super) fn add_artifacts(&mut self, seq: u64, tc: &ToolCall) {
        let origin = origin_key(&tc.tool_name, &tc.arguments_json);
        for (a, o) in self.artifacts.iter_mut().zip(&self.artifact_origins) {
            if *o == origin && a.expiry_seq == 0 {
                a.expiry_seq = seq;
            }
        }
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let result = rules::prefix_bytes(&tc.result, MAX_ANALYSED_BYTES);
        for s in rules::sentences(result) {
            for e in rules::entities(s) {
                // Short tokens ("v2", "x1") are versions or sizes, not things.
                let keep = matches!(
                    e.kind,
                    EntityKind::Identifier | EntityKind::Path | EntityKind::Url | EntityKind::Email
                ) && e.text.chars().count() >= 4;
                if !keep || seen.contains(e.text) || seen.len() >= MAX_ARTIFACTS_PER_CALL {
                    continue;
                }
                seen.insert(e.text);
                if self.artifacts.len() >= MAX_ARTIFACTS {
                    self.drop_item("artifacts");
                    continue;
                }
                self.artifacts.push(Artifact {
                    artifact_id: e.text.to_string(),
                    source_tool: tc.tool_name.clone(),
                    summary: rules::shorten(s, MAX_RESULT_SUMMARY_CHARS),
                    seq,
                    expiry_seq: 0,
                });
                self.artifact_origins.push(origin.clone());
            }
        }
    }

    // -- topics ------------------------------------------------------------------
}
