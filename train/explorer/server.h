// The HTTP server of `scratchformer serve`: cpp-httplib (Debian's libcpp-httplib-dev) around
// Explorer::handle (train/explorer/api.h). It only moves bytes: each HTTP request becomes an
// explorer Request (the raw path from the request line, still percent-encoded, so the explorer
// decodes each segment once itself; the query parsed by request.h), and the Response goes back
// as it is. httplib's own errors (a body over kMaxBodyBytes: 413, an unknown route: 404) are
// answered with the same one-line JSON as the explorer's, a 413 as a 400.
//
//   Explorer explorer(options);
//   Server server(explorer, {"127.0.0.1", 0});   // port 0: the system picks a free port
//   const int port = server.bind();              // throws if the address cannot be bound
//   std::thread t([&] { server.run(); });        // blocks until stop()
//   ...
//   server.stop(); t.join();
//
// stop() may be called from any thread (cmd_serve.cpp calls it when Ctrl-C or SIGTERM arrives,
// through a self-pipe). The server answers requests in a pool of threads; Explorer::handle is
// thread-safe.
#pragma once

#include <memory>
#include <string>

#include "train/explorer/api.h"

namespace sf::explorer {

struct ServerOptions {
  std::string host = "127.0.0.1";  // --host: loopback only unless told otherwise
  int port = 8080;                 // --port; 0 = a free port chosen by the system
};

class Server {
 public:
  Server(Explorer& explorer, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket and returns the real port; throws std::runtime_error with one line when
  // the host or port cannot be bound.
  int bind();
  // Answers requests until stop() (bind() first). Returns false if it stopped on an error.
  bool run();
  // Makes run() return; safe from any thread, and before or after run() started.
  void stop();
  // True once run() is accepting connections.
  bool running() const;

 private:
  struct Impl;  // httplib::Server and the handlers (server.cpp), so this header needs no httplib.h
  std::unique_ptr<Impl> impl_;
};

// The URL to print for `host` and `port`: "http://127.0.0.1:8080/" ("[::1]" for an IPv6 host).
std::string server_url(const std::string& host, int port);

// True for 127.0.0.1, ::1 and localhost: only this machine can connect.
bool is_loopback_host(const std::string& host);

// Whose requests the server answers. A web page on another site can make a student's browser
// send requests to the explorer: to a name it controls that resolves to 127.0.0.1 (DNS
// rebinding: the browser then treats the explorer as that site), or as a cross-origin POST. Both
// show in the headers, and both are refused with a 403:
//   Host    the name must be the address the server listens on, a loopback name (localhost,
//           127.0.0.1, ::1), or, when it listens on every address (0.0.0.0, ::, for a class on
//           the LAN), any IP address; the port must be the server's. A rebinding attack needs a
//           DNS name in Host, which is none of these.
//   Origin  (POST only) absent (curl, scripts: not a browser) or the same host and port as Host;
//           "null" (a sandboxed or file page) and any other origin are refused.
// host_header: "127.0.0.1:8080", "[::1]:8080", "localhost" (port 80). Returns "" when allowed,
// else the one-line reason.
std::string refuse_host(const std::string& host_header, const std::string& bound_host, int port);
std::string refuse_origin(const std::string& origin, const std::string& host_header);

}  // namespace sf::explorer
