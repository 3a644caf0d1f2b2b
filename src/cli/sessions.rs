//! `mnemo session …` and the printing of sessions, turns and watch events
//! for people.

use super::*;

pub(super) async fn session(cmd: SessionCommand) -> Result<(), tonic::Status> {
    match cmd {
        SessionCommand::Create {
            namespace,
            id,
            subject,
            title,
            owner,
            client,
        } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let s = c
                .create_session(pb::CreateSessionRequest {
                    namespace,
                    session_id: id.unwrap_or_default(),
                    subject_id: subject,
                    title,
                    owner_agent: owner,
                    ..Default::default()
                })
                .await?
                .into_inner();
            match s.session {
                Some(s) if client.json => println!("{}", json::session(&s)),
                Some(s) => println!("{}", s.session_id),
                None => {}
            }
        }
        SessionCommand::Show { target, client } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let s = c
                .get_session(pb::GetSessionRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                })
                .await?
                .into_inner();
            match s.session {
                Some(s) if client.json => println!("{}", json::session(&s)),
                Some(s) => print_session(&s),
                None => {}
            }
        }
        SessionCommand::List {
            namespace,
            subject,
            client,
        } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let mut token = String::new();
            loop {
                let page = c
                    .list_sessions(pb::ListSessionsRequest {
                        namespace: namespace.clone(),
                        subject_id: subject.clone(),
                        page_size: 1000,
                        page_token: token,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                for s in &page.sessions {
                    if client.json {
                        println!("{}", json::session(s));
                    } else {
                        print_session(s);
                    }
                }
                if page.next_page_token.is_empty() {
                    break;
                }
                token = page.next_page_token;
            }
        }
        SessionCommand::Close { target, client } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let r = c
                .close_session(pb::CloseSessionRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                })
                .await?
                .into_inner();
            match r.session {
                Some(s) if client.json => println!("{}", json::session(&s)),
                _ => println!("closed"),
            }
        }
        SessionCommand::Delete { target, client } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let r = c
                .delete_session(pb::DeleteSessionRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                })
                .await?
                .into_inner();
            if client.json {
                println!("{}", serde_json::json!({"deleted_turns": r.deleted_turns}));
            } else {
                println!("deleted ({} turns)", r.deleted_turns);
            }
        }
    }
    Ok(())
}

pub(super) fn state_name(state: i32) -> String {
    let name = pb::SessionState::try_from(state).map_or("?", |x| x.as_str_name());
    name.trim_start_matches("SESSION_STATE_").to_lowercase()
}

pub(super) fn role_name(role: i32) -> String {
    let name = pb::Role::try_from(role).map_or("?", |r| r.as_str_name());
    name.trim_start_matches("ROLE_").to_lowercase()
}

pub(super) fn print_session(s: &pb::Session) {
    println!(
        "{}  state={}  subject={:?}  owner={:?}  epoch={}  turns={}  tokens={}  title={:?}",
        s.session_id,
        state_name(s.state),
        s.subject_id,
        s.owner_agent,
        s.lease_epoch,
        s.turn_count,
        s.total_tokens,
        s.title
    );
}

pub(super) fn print_turn(t: &pb::Turn) {
    println!(
        "#{} {} {}: {}",
        t.seq,
        role_name(t.role),
        t.speaker,
        t.content
    );
    if let Some(tc) = &t.tool_call {
        println!(
            "    tool {}({}) -> {}",
            tc.tool_name, tc.arguments_json, tc.result
        );
    }
}

pub(super) fn print_event(ev: pb::WatchSessionResponse) {
    use pb::watch_session_response::Event;
    match ev.event {
        Some(Event::Turn(t)) => print_turn(&t),
        Some(Event::SummaryWritten(s)) => println!(
            "-- summary v{} written (turns 1-{})",
            s.version, s.covers_through_seq
        ),
        Some(Event::Handoff(h)) => println!(
            "-- handed off from {} to {} (lease epoch {}): {}",
            h.from_agent, h.to_agent, h.lease_epoch, h.reason
        ),
        Some(Event::StateChanged(s)) => {
            println!("-- state {} at turn {}", state_name(s.state), s.at_seq)
        }
        None => {}
    }
}

pub(crate) async fn connect(args: &ClientArgs) -> Result<MemoryClient, String> {
    client::connect(&ClientOptions {
        addr: args.addr.clone(),
        api_key: args.api_key.clone(),
        ca_cert: args.ca_cert.clone(),
        client_identity: args.client_cert.clone().zip(args.client_key.clone()),
        ..ClientOptions::default()
    })
    .await
}
