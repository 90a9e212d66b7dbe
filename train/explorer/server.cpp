// The explorer's HTTP server (server.h): cpp-httplib around Explorer::handle.
#include "train/explorer/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include "train/explorer/request.h"

namespace sf::explorer {

namespace {

// Threads answering requests: enough that a slow /api/step does not hold up the page's files
// (the models themselves are used one request at a time, api.h).
constexpr std::size_t kServerThreads = 16;
// Connections waiting to be accepted. httplib listens with a backlog of 5 (compiled into Debian's
// library); a class opening 30 connections at once overflows that, and the kernel drops or
// resets the rest (the load test saw "Read" errors). bind() listens again with this backlog.
constexpr int kListenBacklog = 128;

// An httplib request as the explorer's: the path as it came on the request line (httplib's
// req.path is already decoded), the query parsed by request.h (a bad one is a RequestError).
Request explorer_request(const httplib::Request& req) {
  Request r;
  r.method = req.method;
  const std::size_t q = req.target.find('?');
  r.path = req.target.substr(0, q);
  if (q != std::string::npos) r.query = parse_query(std::string_view(req.target).substr(q + 1));
  r.body = req.body;
  return r;
}

void send(const Response& from, httplib::Response& to) {
  to.status = from.status;
  to.set_content(from.body, from.content_type.c_str());
  to.set_header("X-Content-Type-Options", "nosniff");
  to.set_header("Cache-Control", "no-store");
}

// httplib's own errors, which come with no body: a body over the payload limit (413, answered
// as the explorer's 400), a POST to a path no handler takes (404), a bad request line.
httplib::Server::HandlerResponse answer_httplib_error(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // the explorer's answer
  std::string message;
  int status = res.status;
  const std::string length = req.get_header_value("Content-Length");
  const bool length_is_count = !length.empty() && length.find_first_not_of("0123456789") == std::string::npos;
  if (status == 413 && !length.empty() && !length_is_count) {  // httplib reads "-5" as a huge length
    status = 400;
    message = "a bad Content-Length header: expected a byte count from 0 to " + std::to_string(kMaxBodyBytes) +
              ", got \"" + clip(length) + "\"";
  } else if (status == 413) {
    status = 400;
    message = "the request body is over the limit of " + std::to_string(kMaxBodyBytes) + " bytes";
  } else if (status == 404) {
    message = "not found: " + clip(req.target) + " (POST goes to /api/translate, attention, attribution, step or demo)";
  } else {
    message = "the HTTP request was refused (status " + std::to_string(status) + ")";
  }
  send(error_response(status, message), res);
  return httplib::Server::HandlerResponse::Handled;
}

// "[::1]:8080" -> ("::1", "8080"); "localhost" -> ("localhost", ""); the name lower-cased.
std::pair<std::string, std::string> split_host_port(const std::string& authority) {
  std::string name, port;
  if (!authority.empty() && authority[0] == '[') {  // an IPv6 literal
    const std::size_t close = authority.find(']');
    if (close == std::string::npos) return {authority, ""};
    name = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
  } else {
    const std::size_t colon = authority.rfind(':');
    name = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {name, port};
}

bool is_ip_literal(const std::string& name) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, name.c_str(), buffer) == 1 || inet_pton(AF_INET6, name.c_str(), buffer) == 1;
}

}  // namespace

std::string refuse_host(const std::string& host_header, const std::string& bound_host, int port) {
  const auto [name, given_port] = split_host_port(host_header);
  const bool any_address = bound_host == "0.0.0.0" || bound_host == "::";
  const bool name_ok = is_loopback_host(name) || name == bound_host || (any_address && is_ip_literal(name));
  const bool port_ok = given_port.empty() ? port == 80 : given_port == std::to_string(port);
  if (name_ok && port_ok) return "";
  return "refused: the request's Host is \"" + clip(host_header) + "\", not this server (" +
         server_url(bound_host, port) + ", localhost" + (any_address ? " or an IP address" : "") +
         "); a page on another site may not use the explorer";
}

std::string refuse_origin(const std::string& origin, const std::string& host_header) {
  if (origin.empty()) return "";
  const std::size_t scheme = origin.find("://");
  if (scheme != std::string::npos && split_host_port(origin.substr(scheme + 3)) == split_host_port(host_header))
    return "";
  return "refused: a POST from the page at \"" + clip(origin) + "\", not from this server's own pages (" +
         clip(host_header) + ")";
}

struct Server::Impl {
  Explorer& explorer;
  ServerOptions options;
  httplib::Server http;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> in_run{false};
  int listen_socket = -1;  // the socket httplib last made to bind (see kListenBacklog)
  int bound_port = 0;      // the port bind() got

  Impl(Explorer& e, ServerOptions o) : explorer(e), options(std::move(o)) {}

  void answer(const httplib::Request& req, httplib::Response& res) {
    try {
      send(explorer.handle(explorer_request(req)), res);
    } catch (const RequestError& e) {  // a bad query string
      send(error_response(e.status, e.what()), res);
    } catch (const std::exception& e) {
      send(error_response(500, std::string("internal error: ") + e.what()), res);
    }
  }

  // Every method but POST is answered before httplib reads a body or looks for a route; POST
  // goes through httplib's routing, which reads the body (at most kMaxBodyBytes) first.
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res) {
    std::string refused = refuse_host(req.get_header_value("Host"), options.host, bound_port);
    if (refused.empty() && req.method == "POST")
      refused = refuse_origin(req.get_header_value("Origin"), req.get_header_value("Host"));
    if (!refused.empty()) {
      send(error_response(403, refused), res);
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "POST") return httplib::Server::HandlerResponse::Unhandled;
    answer(req, res);
    if (req.method != "GET" && req.method != "HEAD") res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  }

  void install_handlers() {
    http.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
    http.set_socket_options([this](socket_t sock) {
      httplib::default_socket_options(sock);  // SO_REUSEADDR
      listen_socket = static_cast<int>(sock);
    });
    http.set_payload_max_length(kMaxBodyBytes);
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) { return pre_route(req, res); });
    http.Post(R"(/api/[a-z_]+)", [this](const httplib::Request& req, httplib::Response& res) { answer(req, res); });
    http.set_error_handler(httplib::Server::HandlerWithResponse(answer_httplib_error));
  }
};

Server::Server(Explorer& explorer, ServerOptions options) : impl_(std::make_unique<Impl>(explorer, std::move(options))) {
  impl_->install_handlers();
}

Server::~Server() { stop(); }

int Server::bind() {
  const std::string& host = impl_->options.host;
  const int port = impl_->options.port;
  if (port < 0 || port > 65535) throw std::runtime_error("--port must be 0..65535, got " + std::to_string(port));
  const int bound = port == 0 ? impl_->http.bind_to_any_port(host) : (impl_->http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    throw std::runtime_error("cannot listen on " + host + " port " + std::to_string(port) +
                             " (in use, or not an address of this machine; --port 0 picks a free port)");
  if (impl_->listen_socket >= 0) ::listen(impl_->listen_socket, kListenBacklog);  // Linux: a new backlog
  impl_->bound_port = bound;
  return bound;
}

bool Server::run() {
  impl_->in_run = true;
  bool ok = true;
  if (!impl_->stop_requested) ok = impl_->http.listen_after_bind();
  impl_->in_run = false;
  return ok || impl_->stop_requested;
}

// A stop() that comes while run() is starting waits until httplib is listening (httplib's own
// stop() does nothing before that), so it is never lost.
void Server::stop() {
  if (!impl_) return;
  impl_->stop_requested = true;
  while (impl_->in_run && !impl_->http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->http.stop();
}

bool Server::running() const { return impl_->http.is_running(); }

std::string server_url(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/";
}

bool is_loopback_host(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

}  // namespace sf::explorer
