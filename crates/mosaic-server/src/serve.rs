//! Runs the transports until they are told to stop: [`http`] (the REST
//! API, mem0's routes, MCP over streamable HTTP, the console) on a
//! listening socket until Ctrl-C or SIGTERM, or [`mcp`] over stdin and
//! stdout until the client closes it; each with the periodic reconciler
//! beside it and the index snapshots saved at the end.
//!
//! Both own their tokio runtime and block the calling thread, so a caller
//! (the `mosaic` binary) needs no async code of its own.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::{http, mcp};
use mosaic_service::auth::Credential;
use mosaic_service::{Service, ServiceResult};

/// Serves HTTP on `listen` until Ctrl-C or SIGTERM, then saves the index
/// snapshots. `ready` is called with the bound address once the socket
/// listens (before the first request is accepted).
pub fn serve_http(
    service: Service,
    listen: SocketAddr,
    ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    if service.config().metrics_without_key {
        tracing::warn!(
            "GET /metrics answers without a key: anyone who reaches {listen} sees every \
             tenant's request, write, recall and deletion counts"
        );
    }
    let state = Arc::new(service);
    // The last reference is dropped here, after the runtime: closing the
    // service closes its PostgreSQL clients, which must not happen inside
    // a tokio runtime (the synchronous client drives its own).
    let last = state.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}"))
        })?;
        // The stop signals are taken over before `ready` says the server
        // serves: a SIGTERM sent as soon as that is printed stops it
        // cleanly rather than killing it before its snapshots are saved.
        let stop = shutdown_signal();
        ready(listener.local_addr()?);
        let reconciler = http::spawn_reconciler(state.clone());
        let app = http::app(state.clone());
        axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await?;
        reconciler.abort();
        let flush = state.clone();
        let _ = tokio::task::spawn_blocking(move || flush.flush()).await;
        Ok::<_, std::io::Error>(())
    });
    drop(runtime);
    drop(last);
    served
}

/// Serves MCP over stdin and stdout as `credential` until the client
/// closes the stream, then saves the index snapshots.
pub fn serve_mcp_stdio(service: Service, credential: Credential) -> ServiceResult<()> {
    let state = Arc::new(service);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            mosaic_service::ServiceError::Internal(format!("cannot start the runtime: {e}"))
        })?;
    runtime.block_on(async {
        let reconciler = http::spawn_reconciler(state.clone());
        let served = mcp::serve_stdio(state.clone(), credential).await;
        reconciler.abort();
        served
    })?;
    drop(runtime);
    state.flush()
}

/// Ctrl-C, or SIGTERM on Unix. On Unix both handlers are installed when
/// this is called (inside the runtime), not when the future is first
/// polled, so a signal that arrives in between is not lost (it would
/// otherwise end the process with the signal's default action).
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            match (term, interrupt) {
                (Some(mut term), Some(mut interrupt)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = interrupt.recv() => {}
                    }
                }
                (Some(mut term), None) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = tokio::signal::ctrl_c() => {}
                    }
                }
                (None, _) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
