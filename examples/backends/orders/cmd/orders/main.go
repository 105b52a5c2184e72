// Command orders runs the naive orders backend of package orders.
//
//	ORDERS_LISTEN=127.0.0.1:3000 go run ./examples/backends/orders/cmd/orders
package main

import (
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/whguard/whguard/examples/backends/orders"
)

func main() {
	addr := os.Getenv("ORDERS_LISTEN")
	if addr == "" {
		addr = "127.0.0.1:3000"
	}
	failFirst, _ := strconv.Atoi(os.Getenv("ORDERS_FAIL_FIRST"))
	svc := orders.New(orders.Config{FailFirst: failFirst, RejectType: os.Getenv("ORDERS_REJECT_TYPE"), FlakyType: os.Getenv("ORDERS_FLAKY_TYPE")})
	srv := &http.Server{Addr: addr, Handler: svc.Handler(), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("orders backend listening on %s", addr)
	log.Fatal(srv.ListenAndServe())
}
