//! What a handler takes from a request and gives back on failure: the
//! JSON body, text, query and path extractors (each failure a JSON error
//! with a stable code), the credential of the presented key, and a
//! service error mapped to its HTTP status.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::{AppState, blocking};
use mosaic_service::auth::Credential;
use mosaic_service::error::{ServiceError, ServiceResult};

/// A service error as an HTTP response.
#[derive(Debug)]
pub struct ApiError(pub ServiceError);

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        ApiError(err)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(self.0.body())).into_response();
        if let Some(secs) = self.0.retry_after_secs() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The request's body within the body limit: an oversized body is
/// `413 body_too_large` naming the limit, an unreadable one
/// `400 unreadable_body`.
async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let limit = req.extensions().get::<BodyLimit>().map_or(0, |l| l.0);
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError(ServiceError::BodyTooLarge { limit })
        } else {
            ApiError(ServiceError::bad_request(
                "unreadable_body",
                "the request body could not be read",
            ))
        }
    })
}

/// A strictly decoded JSON body: malformed JSON, unknown fields, wrong types
/// and oversized bodies become JSON errors. An empty body reads as `{}`.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        decode_json(bytes).map(ApiJson).map_err(ApiError)
    }
}

/// Decodes JSON strictly, classifying the failure. A number beyond
/// ±(2^53 - 1) anywhere in the body is `400 integer_out_of_range`.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> ServiceResult<T> {
    mosaic_service::numbers::check_json_integers(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| {
        use serde_json::error::Category;
        let message = e.to_string();
        match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => ServiceError::bad_request(
                "malformed_json",
                format!("the body is not valid JSON: {message}"),
            ),
            Category::Data
                if message.contains("unknown field") || message.contains("unknown variant") =>
            {
                ServiceError::bad_request("unknown_field", message)
            }
            Category::Data => ServiceError::bad_request("invalid_field", message),
        }
    })
}

/// A raw text body (JSON lines), size-limited like [`ApiJson`].
pub struct ApiText(pub String);

impl<S: Send + Sync> FromRequest<S> for ApiText {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await?;
        String::from_utf8(bytes.to_vec()).map(ApiText).map_err(|_| {
            ApiError(ServiceError::bad_request(
                "malformed_body",
                "the body is not UTF-8 text",
            ))
        })
    }
}

/// A strictly decoded query string.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(q)| ApiQuery(q))
            .map_err(|e| ApiError(ServiceError::bad_request("invalid_query", e.body_text())))
    }
}

/// Path parameters, as JSON errors when they do not decode.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| ApiPath(p))
            .map_err(|e| ApiError(ServiceError::bad_request("invalid_path", e.body_text())))
    }
}

/// The authenticated, rate-limited credential of a request.
pub struct Auth(pub Credential);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let KeyAuth { credential, user } = KeyAuth::from_request_parts(parts, state).await?;
        // An application key becomes the named user (which may store the
        // user's first grant: a blocking call); any other key must name
        // nobody or itself (a pure check).
        let credential = match credential {
            Credential::Application { .. } => {
                let service = state.clone();
                blocking(move || service.acting_for(&credential, user.as_deref())).await?
            }
            other => other.acting_for(user.as_deref())?,
        };
        Ok(Auth(credential))
    }
}

/// The authenticated, rate-limited key of a request and the user its
/// `X-Mosaic-User` header names, not yet resolved: for routes that take
/// the user from the body (the mem0-compatible ones).
pub struct KeyAuth {
    /// The key's credential.
    pub credential: Credential,
    /// The header's user, if any.
    pub user: Option<String>,
}

impl FromRequestParts<AppState> for KeyAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let presented = presented_key(&parts.headers).map_err(ApiError)?;
        let user = match parts.headers.get(USER_HEADER) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| {
                        ApiError(ServiceError::bad_request(
                            "invalid_user",
                            "the X-Mosaic-User header is not visible ASCII",
                        ))
                    })?
                    .to_owned(),
            ),
        };
        let service = state.clone();
        let credential = blocking(move || service.authenticate(presented.as_deref())).await?;
        state.check_rate(&credential)?;
        Ok(KeyAuth { credential, user })
    }
}

/// The header mem0's open-source server and many clients send the key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// The key a request presents: `Authorization: Bearer KEY`,
/// `Authorization: Token KEY` (mem0's platform client; either scheme in
/// any case) or `X-API-Key: KEY`
/// (mem0's server). Both headers may be sent only with the same key; any
/// other `Authorization` scheme, or a header that is not text, is 401
/// `invalid_key`.
fn presented_key(headers: &axum::http::HeaderMap) -> ServiceResult<Option<String>> {
    let authorization = match headers.get(header::AUTHORIZATION) {
        None => None,
        Some(value) => {
            let text = value.to_str().map_err(|_| ServiceError::InvalidKey)?;
            // The scheme is case-insensitive (RFC 9110, section 11.1):
            // `bearer KEY` is `Bearer KEY`.
            let (scheme, key) = text.split_once(' ').ok_or(ServiceError::InvalidKey)?;
            if !(scheme.eq_ignore_ascii_case("Bearer") || scheme.eq_ignore_ascii_case("Token")) {
                return Err(ServiceError::InvalidKey);
            }
            Some(key.trim().to_owned())
        }
    };
    let api_key = match headers.get(API_KEY_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ServiceError::InvalidKey)?
                .trim()
                .to_owned(),
        ),
    };
    match (authorization, api_key) {
        (Some(a), Some(b)) if a != b => Err(ServiceError::InvalidKey),
        (Some(key), _) | (None, Some(key)) => Ok(Some(key)),
        (None, None) => Ok(None),
    }
}

/// The header naming the user an application key acts for.
pub const USER_HEADER: &str = "x-mosaic-user";

/// An empty JSON object body (`{}` or nothing).
#[derive(serde::Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

#[derive(Clone, Copy)]
pub(super) struct BodyLimit(pub(super) usize);
